import { describe, expect, it } from 'vitest';
import { ConfigError, loadEnv, missingForRole } from '../../src/config/env.ts';

/** Runs loadEnv and returns the error it throws. */
function failure(raw: Record<string, string>): ConfigError {
  try {
    loadEnv(raw);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error(`loadEnv accepted ${Object.keys(raw).join(', ')}`);
}

describe('loadEnv', () => {
  it('applies the documented defaults to an empty environment', () => {
    const env = loadEnv({});
    expect(env).toMatchObject({
      SLACK_API_URL: 'https://slack.com/api/',
      REDIS_URL: 'redis://127.0.0.1:6379',
      REDIS_PREFIX: 'cloudops',
      PORT: 3000,
      HOST: '0.0.0.0',
      POLICY_FILE: './policy.yml',
      ROLE: 'all',
      LOG_LEVEL: 'info',
    });
    expect(env.CLOUD_API_URL).toBeUndefined();
    expect(env.CLOUD_API_DEADLINE_MS).toBe(45_000);
  });

  it('reads a full environment, trimming values and treating empty strings as unset', () => {
    const env = loadEnv({
      SLACK_BOT_TOKEN: ' xoxb-1-2-3 ',
      SLACK_SIGNING_SECRET: 'shh',
      SLACK_APP_TOKEN: '',
      CLOUD_API_URL: 'http://127.0.0.1:9000',
      CLOUD_API_KEY: 'k',
      PORT: '0',
      ROLE: 'worker',
      LOG_LEVEL: 'silent',
      UNRELATED: 'ignored',
    });
    expect(env.SLACK_BOT_TOKEN).toBe('xoxb-1-2-3');
    expect(env.SLACK_APP_TOKEN).toBeUndefined();
    expect(env.PORT).toBe(0);
    expect(env.ROLE).toBe('worker');
    expect(env).not.toHaveProperty('UNRELATED');
  });

  // Each case: a bad value, including a secret that must never be echoed back.
  it.each([
    ['SLACK_BOT_TOKEN', 'xoxp-9999-SECRETVALUE', /xoxb-/],
    ['SLACK_APP_TOKEN', 'xoxb-SECRETVALUE', /xapp-/],
    ['CLOUD_API_URL', 'ftp://SECRETVALUE.example', /base URL/],
    ['CLOUD_API_DEADLINE_MS', '45s', /milliseconds/],
    ['CLOUD_API_DEADLINE_MS', '10', /from 100 to 600000/],
    ['REDIS_URL', 'redis//:SECRETVALUE@cache:6379', /redis:\/\//],
    ['SLACK_API_URL', 'SECRETVALUE', /http\(s\) URL/],
    ['PORT', 'SECRETVALUE', /port/],
    ['PORT', '70000', /0 to 65535/],
    ['PORT', '80.5', /whole port/],
    ['ROLE', 'SECRETVALUE', /all, web, worker, scheduler/],
    ['LOG_LEVEL', 'SECRETVALUE', /pino level/],
    ['REDIS_PREFIX', 'SECRET VALUE', /letters, digits/],
    ['HOST', 'http://SECRETVALUE', /IP address or host name/],
  ])(
    'stops on a bad %s with one line naming it and what is expected, without its value',
    (name, value, expected) => {
      const error = failure({ SLACK_SIGNING_SECRET: 'also-SECRETVALUE-not-shown', [name]: value });
      expect(error.message.startsWith(`${name}: `)).toBe(true);
      expect(error.message).toMatch(expected);
      expect(error.message).not.toContain('\n');
      expect(error.message).not.toContain('SECRETVALUE');
      expect(error.message).not.toContain('SECRET VALUE');
      expect(String(error.stack)).not.toContain('SECRETVALUE');
      expect(error.cause).toBeUndefined();
    },
  );

  it.each(['127.0.0.1', '0.0.0.0', '::', '::1', 'localhost', 'bot.internal'])(
    'takes HOST %s as the address to bind',
    (host) => {
      expect(loadEnv({ HOST: ` ${host} ` }).HOST).toBe(host);
    },
  );
});

describe('missingForRole', () => {
  const base = { SLACK_BOT_TOKEN: 'xoxb-1', CLOUD_API_URL: 'http://127.0.0.1:1', CLOUD_API_KEY: 'k' };

  it('needs the signing secret only for a web role in HTTP mode', () => {
    expect(missingForRole(loadEnv(base))).toEqual(['SLACK_SIGNING_SECRET']);
    expect(missingForRole(loadEnv({ ...base, SLACK_APP_TOKEN: 'xapp-1' }))).toEqual([]);
    expect(missingForRole(loadEnv({ ...base, ROLE: 'worker' }))).toEqual([]);
  });

  it('names every missing variable', () => {
    expect(missingForRole(loadEnv({ ROLE: 'scheduler' }))).toEqual([
      'SLACK_BOT_TOKEN',
      'CLOUD_API_URL',
      'CLOUD_API_KEY',
    ]);
  });
});
