import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadEnv } from '../../src/config/env.ts';
import { SealKeyError, sealKeyBytes, sealKeysFrom } from '../../src/config/seal-keys.ts';
import { SECRET_VARIABLES, withSecretFiles } from '../../src/config/secret-files.ts';
import { TEST_SEAL_KEY, TEST_SEAL_KEY_PREVIOUS } from '../helpers/seal.ts';

function sealKeyError(current: string, previous?: string): SealKeyError {
  try {
    sealKeysFrom(current, previous);
  } catch (error) {
    if (error instanceof SealKeyError) return error;
    throw error;
  }
  throw new Error('sealKeysFrom accepted the key');
}

describe('sealKeysFrom', () => {
  it('reads 32 random bytes as hex, base64 or base64url alike; the key id is the first 12 hex of its SHA-256', () => {
    const bytes = Buffer.from(TEST_SEAL_KEY, 'hex');
    const hex = sealKeysFrom(TEST_SEAL_KEY);
    expect(hex.kid).toMatch(/^[0-9a-f]{12}$/);
    expect(sealKeysFrom(bytes.toString('base64')).kid).toBe(hex.kid);
    expect(sealKeysFrom(bytes.toString('base64url')).kid).toBe(hex.kid);
    expect(sealKeyBytes(TEST_SEAL_KEY.toUpperCase())).toEqual(bytes);
    expect(hex.previousKid).toBeUndefined();
  });

  it('refuses a missing, malformed or short key with a code, naming the variable, never echoing the value', () => {
    expect(sealKeyError('')).toMatchObject({ code: 'seal_key_missing', variable: 'SEAL_KEY' });
    const short = randomBytes(31).toString('hex');
    const error = sealKeyError(short);
    expect(error).toMatchObject({ code: 'seal_key_short', variable: 'SEAL_KEY' });
    expect(error.message).toBe(
      'SEAL_KEY: 31 bytes is too short; give at least 32 random bytes as hex or base64, e.g. from openssl rand -hex 32',
    );
    expect(error.message).not.toContain(short);
    expect(sealKeyError('not a key, with spaces and punctuation!')).toMatchObject({
      code: 'seal_key_malformed',
    });
    expect(sealKeyError(TEST_SEAL_KEY, 'c0ffee')).toMatchObject({
      code: 'seal_key_short',
      variable: 'SEAL_KEY_PREVIOUS',
    });
  });

  it('a seal checks for its own purpose and data only', () => {
    const keys = sealKeysFrom(TEST_SEAL_KEY);
    const seal = keys.seal('decision', 'request r1 rev 3');
    expect(seal).toMatch(new RegExp(`^${keys.kid}\\.[A-Za-z0-9_-]{43}$`));
    expect(keys.check('decision', 'request r1 rev 3', seal)).toBe(true);
    expect(keys.check('decision', 'request r1 rev 4', seal)).toBe(false);
    expect(keys.check('audit', 'request r1 rev 3', seal)).toBe(false);
    expect(keys.check('verify', 'request r1 rev 3', seal)).toBe(false);
    // Another key's seal of the same data does not check.
    expect(sealKeysFrom(TEST_SEAL_KEY_PREVIOUS).check('decision', 'request r1 rev 3', seal)).toBe(false);
  });

  it('false, never a throw, for any malformed seal', () => {
    const keys = sealKeysFrom(TEST_SEAL_KEY);
    const good = keys.seal('decision', 'x');
    const [kid, mac] = good.split('.') as [string, string];
    for (const bad of [
      '',
      '.',
      kid,
      `${kid}.`,
      `.${mac}`,
      `${kid}.${mac}.`,
      `${kid}.${mac}A`,
      `${kid}.${mac.slice(0, -1)}`,
      `${kid}.${mac.slice(0, -1)}${mac.endsWith('A') ? 'B' : 'A'}`,
      `${kid.toUpperCase()}.${mac}`,
      `000000000000.${mac}`,
      `${kid}.${Buffer.from(mac, 'base64url').toString('base64')}+/`,
      `${kid}.${'A'.repeat(5000)}`,
      undefined as unknown as string,
      42 as unknown as string,
    ])
      expect(keys.check('decision', 'x', bad)).toBe(false);
    expect(keys.check('decision', 'x', good)).toBe(true);
  });

  it('rotation: the previous key checks seals made under it, and never seals', () => {
    const before = sealKeysFrom(TEST_SEAL_KEY_PREVIOUS);
    const old = before.seal('decision', 'd');
    const rotated = sealKeysFrom(TEST_SEAL_KEY, TEST_SEAL_KEY_PREVIOUS);
    expect(rotated.previousKid).toBe(before.kid);
    expect(rotated.check('decision', 'd', old)).toBe(true);
    expect(rotated.seal('decision', 'd').startsWith(`${rotated.kid}.`)).toBe(true);
    expect(rotated.seal('decision', 'd')).not.toBe(old);
    // Once SEAL_KEY_PREVIOUS is removed, the old seal no longer checks.
    expect(sealKeysFrom(TEST_SEAL_KEY).check('decision', 'd', old)).toBe(false);
    // A seal claiming the current key's id but made under the previous key does not check.
    expect(rotated.check('decision', 'd', `${rotated.kid}.${old.split('.')[1]}`)).toBe(false);
  });
});

describe('SEAL_KEY in the environment', () => {
  it('is checked like the key itself, the message naming the variable and not the value', () => {
    expect(loadEnv({ SEAL_KEY: TEST_SEAL_KEY }).SEAL_KEY).toBe(TEST_SEAL_KEY);
    const short = 'deadbeef'.repeat(4);
    expect(() => loadEnv({ SEAL_KEY: short })).toThrow(/^SEAL_KEY: 16 bytes is too short/);
    expect(() => loadEnv({ SEAL_KEY: TEST_SEAL_KEY, SEAL_KEY_PREVIOUS: 'nope nope' })).toThrow(
      /^SEAL_KEY_PREVIOUS: neither hex nor base64/,
    );
    expect(() => loadEnv({ SEAL_KEY_PREVIOUS: TEST_SEAL_KEY })).toThrow(
      /^SEAL_KEY_PREVIOUS: set without SEAL_KEY/,
    );
  });
});

describe('NAME_FILE', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cloudops-secret-files-'));
  const file = (name: string, content: string) => {
    const path = join(dir, name);
    writeFileSync(path, content);
    return path;
  };

  it('reads every secret variable from its file, one trailing newline removed', () => {
    for (const name of SECRET_VARIABLES) {
      const { env, problems } = withSecretFiles({ [`${name}_FILE`]: file(name, `value-of-${name}\r\n`) });
      expect(problems).toEqual([]);
      expect(env[name]).toBe(`value-of-${name}`);
    }
    const env = loadEnv({
      SLACK_BOT_TOKEN_FILE: file('bot', 'xoxb-from-a-file\n'),
      SEAL_KEY_FILE: file('seal', `${TEST_SEAL_KEY}\n`),
      OIDC_CLIENT_SECRET_FILE: file('oidc', 'sso-secret'),
      OIDC_CLIENT_ID: 'cloudops',
      OIDC_ISSUER: 'https://login.example.com',
      PUBLIC_URL: 'https://cloudops.example.com',
    });
    expect(env.SLACK_BOT_TOKEN).toBe('xoxb-from-a-file');
    expect(env.SEAL_KEY).toBe(TEST_SEAL_KEY);
    expect(env.OIDC_CLIENT_SECRET).toBe('sso-secret');
  });

  it('both set, or a file that cannot be read or is empty: a line naming the variables, never the content', () => {
    const error = (() => {
      try {
        loadEnv({
          CLOUD_API_KEY: 'in-env-key',
          CLOUD_API_KEY_FILE: file('key', 'in-file-key'),
          SEAL_KEY_FILE: join(dir, 'missing'),
          SLACK_SIGNING_SECRET_FILE: file('empty', '\n'),
        });
      } catch (e) {
        return e as ConfigError;
      }
      throw new Error('accepted');
    })();
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.problems).toEqual([
      `SLACK_SIGNING_SECRET_FILE: ${join(dir, 'empty')} is empty`,
      'CLOUD_API_KEY and CLOUD_API_KEY_FILE: both are set; give the secret one way only',
      `SEAL_KEY_FILE: ${join(dir, 'missing')} could not be read (ENOENT)`,
    ]);
    expect(error.message).not.toContain('in-file-key');
    expect(error.message).not.toContain('in-env-key');
  });

  it('a file too large to be a secret is refused unread into the environment', () => {
    const { problems, env } = withSecretFiles({ SEAL_KEY_FILE: file('big', 'a'.repeat(70_000)) });
    expect(problems).toEqual([
      `SEAL_KEY_FILE: ${join(dir, 'big')} holds more than 65536 bytes; a secret file holds the secret alone`,
    ]);
    expect(env.SEAL_KEY).toBeUndefined();
  });

  it('a device or a directory is refused at once, never read (/dev/zero would be read forever)', () => {
    const started = Date.now();
    const { problems, env } = withSecretFiles({ SEAL_KEY_FILE: '/dev/zero', CLOUD_API_KEY_FILE: dir });
    expect(problems).toEqual([
      'CLOUD_API_KEY_FILE: '.concat(dir, ' is not a regular file'),
      'SEAL_KEY_FILE: /dev/zero is not a regular file',
    ]);
    expect(env.SEAL_KEY).toBeUndefined();
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it('a symlink to the secret (as Kubernetes mounts them) is followed', () => {
    const target = file('k8s-target', `${TEST_SEAL_KEY}\n`);
    const link = join(dir, 'k8s-link');
    symlinkSync(target, link);
    expect(withSecretFiles({ SEAL_KEY_FILE: link })).toEqual({
      env: { SEAL_KEY_FILE: link, SEAL_KEY: TEST_SEAL_KEY },
      problems: [],
    });
  });

  it('a variable that is not a secret has no _FILE form', () => {
    expect(withSecretFiles({ PORT_FILE: file('port', '4000') }).env.PORT).toBeUndefined();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
});
