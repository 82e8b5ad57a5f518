import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../sim/local-redis.ts';
import { runProcess } from '../helpers/run-process.ts';
import { TEST_SEAL_KEY } from '../helpers/seal.ts';

// `npm start` as an operator runs it: a child process with only the environment given (PATH kept for node),
// running the compiled dist/ (the global setup builds it when stale, as npm start's prestart does).
const repo = fileURLToPath(new URL('../../', import.meta.url));
const pkg = JSON.parse(await readFile(join(repo, 'package.json'), 'utf8')) as { scripts: { start: string } };
// The start script's node arguments, with the entry made absolute: the child runs in a temp dir, not the clone.
const START = pkg.scripts.start
  .split(' ')
  .slice(1)
  .map((arg) => (arg.endsWith('.js') ? join(repo, arg) : arg));

interface Exit {
  code: number | null;
  stdout: string;
  stderr: string;
}

function start(env: Record<string, string>, timeoutMs = 45_000, cwd = dir): Promise<Exit> {
  return runProcess(process.execPath, START, {
    cwd,
    env: { PATH: process.env.PATH ?? '', ...env },
    timeoutMs,
  });
}

/** The non-empty lines a process wrote to stderr. */
const lines = (text: string) => text.split('\n').filter((line) => line.trim() !== '');

const SECRET_LOOKING = 'not-a-real-token-7f3a9c';
const COMPLETE = {
  SLACK_BOT_TOKEN: 'xoxb-0000-0000-startuptest',
  SLACK_SIGNING_SECRET: 'startup-test-signing-secret',
  CLOUD_API_URL: 'http://127.0.0.1:9/',
  CLOUD_API_KEY: 'startup-test-api-key',
  SEAL_KEY: TEST_SEAL_KEY,
};

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cloudops-start-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

// Each start loads the whole bot (~1.5 s idle, ~10 s on a loaded CI box): the cases run side by side.
describe.concurrent('npm start without a working configuration', { timeout: 120_000 }, () => {
  it('with an empty environment: one line listing what is missing for Socket Mode (as the manifest ships) and pointing to npm run demo, exit 1', async () => {
    const run = await start({});
    expect(run.code).toBe(1);
    expect(lines(run.stderr)).toHaveLength(1);
    const [line] = lines(run.stderr);
    expect(line).toMatch(
      /^cloudops: missing SLACK_BOT_TOKEN, SLACK_APP_TOKEN, CLOUD_API_URL, CLOUD_API_KEY, SEAL_KEY\. Socket Mode \(as manifest\.yml sets the app up\) needs SLACK_APP_TOKEN, an app-level token \(xapp-…\); for HTTP mode set SLACK_SIGNING_SECRET instead\./,
    );
    expect(line).toContain('npm run demo');
    expect(run.stdout).toBe('');
  });

  it.each([
    [
      'HTTP mode (SLACK_SIGNING_SECRET set)',
      { SLACK_SIGNING_SECRET: 'a-signing-secret' },
      'HTTP mode needs SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET',
    ],
    [
      'Socket Mode (SLACK_APP_TOKEN set)',
      { SLACK_APP_TOKEN: 'xapp-1-abc' },
      'Socket Mode needs SLACK_BOT_TOKEN and SLACK_APP_TOKEN',
    ],
  ])('%s without the bot token: the line says what that mode needs', async (_mode, env, needs) => {
    const run = await start({
      ...env,
      CLOUD_API_URL: 'http://127.0.0.1:9/',
      CLOUD_API_KEY: 'k-123456',
      SEAL_KEY: TEST_SEAL_KEY,
    });
    expect(run.code).toBe(1);
    const [line] = lines(run.stderr);
    expect(line).toMatch(/^cloudops: missing SLACK_BOT_TOKEN\. /);
    expect(line).toContain(needs);
  });

  // The other variables' messages are unit-tested with loadEnv; here the path through `npm start` is proven.
  it.each([
    ['PORT', 'abc', /PORT: expected a port number$/],
    ['SLACK_BOT_TOKEN', SECRET_LOOKING, /SLACK_BOT_TOKEN: expected a bot token starting with xoxb-$/],
  ])(
    'a malformed %s: one line naming it, without echoing the value, exit 1',
    async (name, value, expected) => {
      const run = await start({ [name]: value });
      expect(run.code).toBe(1);
      expect(lines(run.stderr)).toHaveLength(1);
      expect(lines(run.stderr)[0]).toMatch(new RegExp(`^cloudops: ${expected.source}`));
      expect(run.stderr).not.toContain(value);
    },
  );

  it('a policy file with a bad field: one line with the file, line and field', async () => {
    const file = join(dir, 'bad.yml');
    await writeFile(
      file,
      'currency: EUR\napprovers: [U0ADMIN]\nprojects:\n  - name: shop\n    uuid: not-a-uuid\n    channels: [C0PROD]\n',
    );
    const run = await start({ ...COMPLETE, POLICY_FILE: file });
    expect(run.code).toBe(1);
    expect(lines(run.stderr)).toEqual([`cloudops: ${file}:5: projects[0].uuid: expected a UUID`]);
    for (const secret of Object.values(COMPLETE)) expect(run.stderr).not.toContain(secret);
  });

  it('a verify: rule the environment cannot serve: one line naming the rule (file, line, field) and the variables, exit 1', async () => {
    const file = join(dir, 'verify.yml');
    await writeFile(
      file,
      'approvers: [U0ADMIN]\napprovals:\n  count: 1\n  rules:\n    - { when: { kind: restore }, count: 1, verify: sso }\n',
    );
    const run = await start({ ...COMPLETE, POLICY_FILE: file, PUBLIC_URL: 'https://cloudops.example.com' });
    expect(run.code).toBe(1);
    expect(lines(run.stderr)).toEqual([
      `cloudops: ${file}:5: approvals.rules[0].verify: sso needs OIDC_ISSUER, OIDC_CLIENT_ID and OIDC_CLIENT_SECRET (the SSO login), which are not set; set them or remove the verify (docs/policy.md#verified-approvals)`,
    ]);
  });

  it('Redis not answering at REDIS_URL: one line naming REDIS_URL, exit 1', async () => {
    const file = join(dir, 'ok.yml');
    await writeFile(file, 'approvers: [U0ADMIN]\n');
    const port = await freePort();
    const run = await start({
      ...COMPLETE,
      POLICY_FILE: file,
      REDIS_URL: `redis://user:redis-password-xyz@127.0.0.1:${port}`,
      PORT: '0',
      LOG_LEVEL: 'silent',
    });
    expect(run.code).toBe(1);
    const stderr = lines(run.stderr);
    expect(stderr).toHaveLength(1);
    expect(stderr[0]).toMatch(
      /^cloudops: could not start: REDIS_URL: no Redis answered at redis:\/\/127\.0\.0\.1:\d+/,
    );
    expect(run.stderr).not.toContain('redis-password-xyz');
  });
});

describe.concurrent('npm start and SEAL_KEY, and secrets given as NAME_FILE', { timeout: 120_000 }, () => {
  /** COMPLETE without SEAL_KEY, a valid policy, and Redis nowhere: a start that gets past the configuration stops there. */
  async function withoutKey(): Promise<Record<string, string>> {
    const { SEAL_KEY: _key, ...rest } = COMPLETE;
    const file = join(dir, 'seal-ok.yml');
    await writeFile(file, 'approvers: [U0ADMIN]\n');
    return {
      ...rest,
      POLICY_FILE: file,
      REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
      LOG_LEVEL: 'silent',
    };
  }

  it.each(['all', 'web', 'worker', 'scheduler'])(
    'ROLE=%s without SEAL_KEY: one line naming it, exit 1; the bot never makes one up',
    async (role) => {
      const run = await start({ ...(await withoutKey()), ROLE: role });
      expect(run.code).toBe(1);
      expect(lines(run.stderr)).toHaveLength(1);
      expect(lines(run.stderr)[0]).toMatch(/^cloudops: missing SEAL_KEY\. SEAL_KEY seals every approval/);
    },
  );

  it('a SEAL_KEY of 16 bytes: one line naming it and why, without echoing it, exit 1', async () => {
    const short = 'c0ffee00c0ffee00c0ffee00c0ffee00';
    const run = await start({ ...(await withoutKey()), SEAL_KEY: short });
    expect(run.code).toBe(1);
    expect(lines(run.stderr)).toEqual([
      'cloudops: SEAL_KEY: 16 bytes is too short; give at least 32 random bytes as hex or base64, e.g. from openssl rand -hex 32',
    ]);
    expect(run.stderr).not.toContain(short);
  });

  it('SEAL_KEY_FILE and SLACK_BOT_TOKEN_FILE are read (a trailing newline dropped): the start goes on to Redis', async () => {
    const env = await withoutKey();
    const keyFile = join(dir, 'seal-key');
    const tokenFile = join(dir, 'bot-token');
    await writeFile(keyFile, `${TEST_SEAL_KEY}\n`);
    await writeFile(tokenFile, `${env.SLACK_BOT_TOKEN}\n`);
    const { SLACK_BOT_TOKEN: _token, ...rest } = env;
    const run = await start({ ...rest, SEAL_KEY_FILE: keyFile, SLACK_BOT_TOKEN_FILE: tokenFile });
    expect(run.code).toBe(1);
    expect(lines(run.stderr)).toHaveLength(1);
    expect(lines(run.stderr)[0]).toMatch(/^cloudops: could not start: REDIS_URL: no Redis answered/);
  });

  it('a secret file whose content is malformed is named by its variable, never shown', async () => {
    const file = join(dir, 'not-a-bot-token');
    await writeFile(file, `${SECRET_LOOKING}\n`);
    const run = await start({ ...COMPLETE, SLACK_BOT_TOKEN: '', SLACK_BOT_TOKEN_FILE: file });
    expect(run.code).toBe(1);
    expect(lines(run.stderr)).toEqual([
      'cloudops: SLACK_BOT_TOKEN: expected a bot token starting with xoxb-',
    ]);
    expect(run.stderr).not.toContain(SECRET_LOOKING);
  });

  it('both SEAL_KEY and SEAL_KEY_FILE set: one line naming both, exit 1', async () => {
    const file = join(dir, 'seal-key-both');
    await writeFile(file, TEST_SEAL_KEY);
    const run = await start({ ...COMPLETE, SEAL_KEY_FILE: file });
    expect(run.code).toBe(1);
    expect(lines(run.stderr)).toEqual([
      'cloudops: SEAL_KEY and SEAL_KEY_FILE: both are set; give the secret one way only',
    ]);
    expect(run.stderr).not.toContain(TEST_SEAL_KEY);
  });

  it('a secret file that is a FIFO nobody writes to: refused at once, start-up does not hang opening it', async () => {
    const fifo = join(dir, 'secret-fifo');
    execFileSync('mkfifo', [fifo]);
    const run = await start({ ...COMPLETE, CLOUD_API_KEY: '', CLOUD_API_KEY_FILE: fifo }, 20_000);
    expect(run.code).toBe(1);
    expect(lines(run.stderr)).toEqual([`cloudops: CLOUD_API_KEY_FILE: ${fifo} is not a regular file`]);
  });

  it('a secret file that is not there: one line naming the variable and the path', async () => {
    const gone = join(dir, 'no-such-secret');
    const run = await start({ ...COMPLETE, CLOUD_API_KEY: '', CLOUD_API_KEY_FILE: gone });
    expect(run.code).toBe(1);
    expect(lines(run.stderr)).toEqual([`cloudops: CLOUD_API_KEY_FILE: ${gone} could not be read (ENOENT)`]);
  });
});

describe.concurrent('npm start reads .env from its working directory, the environment winning', {
  timeout: 120_000,
}, () => {
  /** A working directory of its own with this `.env`, and two policy files with different bad fields. */
  async function withDotEnvFile(): Promise<{ cwd: string; fromFile: string; fromEnv: string }> {
    const cwd = await mkdtemp(join(dir, 'dotenv-'));
    const fromFile = join(cwd, 'from-file.yml');
    const fromEnv = join(cwd, 'from-env.yml');
    await writeFile(fromFile, 'approvers: [U0ADMIN]\ncurrency: 12\n');
    await writeFile(fromEnv, 'approvers: [U0ADMIN]\nretention_days: -1\n');
    const lines = Object.entries({ ...COMPLETE, POLICY_FILE: fromFile, LOG_LEVEL: 'silent' }).map(
      ([name, value]) => `${name}="${value}"`,
    );
    await writeFile(join(cwd, '.env'), `# written by ops-start.test.ts\n${lines.join('\n')}\n`);
    return { cwd, fromFile, fromEnv };
  }

  it('takes every variable from .env when the environment has none', async () => {
    const { cwd, fromFile } = await withDotEnvFile();
    const run = await start({}, 45_000, cwd);
    expect(run.code).toBe(1);
    // Past "missing …": the variables came from the file, and POLICY_FILE names the file's policy.
    expect(lines(run.stderr)).toHaveLength(1);
    expect(lines(run.stderr)[0]).toMatch(new RegExp(`^cloudops: ${fromFile}:2: currency`));
  });

  it('a variable set in the environment wins over .env; an empty one does not', async () => {
    const { cwd, fromEnv } = await withDotEnvFile();
    // An empty SLACK_BOT_TOKEN would otherwise read as missing.
    const run = await start({ POLICY_FILE: fromEnv, SLACK_BOT_TOKEN: '' }, 45_000, cwd);
    expect(run.code).toBe(1);
    expect(lines(run.stderr)).toHaveLength(1);
    expect(lines(run.stderr)[0]).toMatch(new RegExp(`^cloudops: ${fromEnv}:2: retention_days`));
    for (const secret of Object.values(COMPLETE)) expect(run.stderr).not.toContain(secret);
  });
});
