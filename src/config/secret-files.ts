/**
 * `NAME_FILE` for every secret variable: a path whose content is the value, as Docker and Kubernetes mount secrets
 * (docs/configuration.md#secrets-in-files), so a secret need not sit in the environment any process listing shows.
 */
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';

/**
 * The variables that may be given as `NAME_FILE`: every one that holds a secret, whichever part of the bot reads it
 * (a variable read elsewhere, such as CLOUDOPS_AGENT_TOKEN, is filled in the same environment).
 */
export const SECRET_VARIABLES = [
  'SLACK_BOT_TOKEN',
  'SLACK_APP_TOKEN',
  'SLACK_SIGNING_SECRET',
  'CLOUD_API_KEY',
  'SEAL_KEY',
  'SEAL_KEY_PREVIOUS',
  'OIDC_CLIENT_SECRET',
  'REDIS_URL',
  'REDIS_PASSWORD',
  'REDIS_SENTINEL_PASSWORD',
  'AUDIT_WEBHOOK_SECRET',
  'CLOUDOPS_AGENT_TOKEN',
  'JIRA_API_TOKEN',
  'JIRA_TOKEN',
  'SERVICENOW_PASSWORD',
] as const;

/** The longest secret file read: a secret is short, and a path to a large file is a mistake, not a value. */
const MAX_SECRET_FILE_BYTES = 64 * 1024;

const isSet = (value: string | undefined): value is string => value !== undefined && value.trim() !== '';

/**
 * The environment with each `NAME_FILE` read into `NAME` (one trailing newline removed, as `echo` and editors leave
 * one), and the problems found, one line each naming the variables: both set, or a file that cannot be read. A
 * problem never shows the file's content.
 */
export function withSecretFiles(raw: Record<string, string | undefined>): {
  env: Record<string, string | undefined>;
  problems: string[];
} {
  const env = { ...raw };
  const problems: string[] = [];
  for (const name of SECRET_VARIABLES) {
    const path = raw[`${name}_FILE`];
    if (!isSet(path)) continue;
    if (isSet(raw[name])) {
      problems.push(`${name} and ${name}_FILE: both are set; give the secret one way only`);
      continue;
    }
    const read = readSecretFile(path.trim());
    if (typeof read === 'string') env[name] = read;
    else problems.push(`${name}_FILE: ${read.why}`);
  }
  return { env, problems };
}

function readSecretFile(path: string): string | { why: string } {
  let fd: number | undefined;
  try {
    // Non-blocking: opening a FIFO for reading otherwise waits for a writer, and start-up would hang there before
    // the check below could refuse it (a regular file opens and reads the same either way).
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
    // A device or a pipe (/dev/zero, /dev/stdin) would be read forever: a secret is a file (Docker's and
    // Kubernetes' are, behind their symlinks), and only its first bytes past the limit are ever read.
    if (!fstatSync(fd).isFile()) return { why: `${path} is not a regular file` };
    const buffer = Buffer.alloc(MAX_SECRET_FILE_BYTES + 1);
    const length = readSync(fd, buffer, 0, buffer.length, 0);
    if (length > MAX_SECRET_FILE_BYTES)
      return {
        why: `${path} holds more than ${MAX_SECRET_FILE_BYTES} bytes; a secret file holds the secret alone`,
      };
    const text = buffer
      .subarray(0, length)
      .toString('utf8')
      .replace(/\r?\n$/, '');
    if (text.trim() === '') return { why: `${path} is empty` };
    return text;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'error';
    return { why: `${path} could not be read (${code})` };
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
