import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadEnv, missingForRole, missingLine } from '../../src/config/env.ts';
import {
  describeRedis,
  reconnectOnError,
  redisKeyPrefix,
  redisTarget,
  tlsOptions,
} from '../../src/config/redis-connection.ts';
import { TEST_SEAL_KEY } from '../helpers/seal.ts';

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
  it('names every malformed variable, one line each, in one error', () => {
    const error = failure({ PORT: 'x', METRICS_PORT: 'y', ROLE: 'boss', SLACK_BOT_TOKEN: 'xoxp-1' });
    expect(error.problems.map((p) => p.split(':')[0])).toEqual([
      'SLACK_BOT_TOKEN',
      'PORT',
      'METRICS_PORT',
      'ROLE',
    ]);
    expect(error.message.split('\n')[0]).toBe('4 variables are malformed:');
  });

  it('reads the audit export: an http(s) URL, a secret of 16 characters or more, never a secret alone', () => {
    const env = loadEnv({
      AUDIT_WEBHOOK_URL: 'https://logs.example.com/a',
      AUDIT_WEBHOOK_SECRET: 'x'.repeat(16),
    });
    expect(env.AUDIT_WEBHOOK_URL).toBe('https://logs.example.com/a');
    expect(failure({ AUDIT_WEBHOOK_URL: 'redis://logs:6379' }).message).toMatch(
      /^AUDIT_WEBHOOK_URL: expected an http\(s\) URL/,
    );
    expect(
      failure({ AUDIT_WEBHOOK_URL: 'https://l/a', AUDIT_WEBHOOK_SECRET: 'SECRETVALUE' }).message,
    ).not.toContain('SECRETVALUE');
    expect(failure({ AUDIT_WEBHOOK_SECRET: 'y'.repeat(20) }).message).toMatch(
      /^AUDIT_WEBHOOK_SECRET: set without AUDIT_WEBHOOK_URL/,
    );
  });

  it('says when PORT and METRICS_PORT are the same port, rather than that another process has it', () => {
    expect(failure({ PORT: '9464', METRICS_PORT: '9464' }).message).toBe(
      'METRICS_PORT: 9464 is PORT too; /metrics needs a port of its own (default 9464), so set one of them to another port',
    );
    expect(failure({ PORT: '3000', METRICS_PORT: '3000' }).message).toMatch(
      /^METRICS_PORT: 3000 is PORT too/,
    );
    expect(loadEnv({ PORT: '0', METRICS_PORT: '0' }).PORT).toBe(0);
  });

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
    ['REDIS_SENTINELS', 'SECRETVALUE', /host:port of each Sentinel/],
    ['REDIS_SENTINELS', '10.0.0.1:26379,SECRETVALUE:99999', /host:port of each Sentinel/],
    ['REDIS_SENTINELS', '10.0.0.1:26379,,10.0.0.2:26379', /host:port of each Sentinel/],
    ['REDIS_SENTINEL_NAME', 'SECRET VALUE', /master name/],
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

describe('Redis through Sentinels', () => {
  it('uses REDIS_URL alone when no Sentinels are set', () => {
    const target = redisTarget(loadEnv({ REDIS_URL: 'redis://:pw@cache:6380/2' }));
    expect(target).toEqual({
      url: 'redis://:pw@cache:6380/2',
      sentinels: undefined,
      sentinelName: 'mymaster',
    });
    expect(describeRedis(target)).toEqual({ variable: 'REDIS_URL', where: 'redis://cache:6380/2' });
  });

  it('reads REDIS_SENTINELS as host:port pairs (IPv6 in brackets), with the default master name', () => {
    const env = loadEnv({ REDIS_SENTINELS: ' 10.0.0.1:26379, sentinel-2.internal:26380,[::1]:26381 ' });
    const target = redisTarget(env);
    expect(target.sentinels).toEqual([
      { host: '10.0.0.1', port: 26379 },
      { host: 'sentinel-2.internal', port: 26380 },
      { host: '::1', port: 26381 },
    ]);
    expect(target.sentinelName).toBe('mymaster');
    expect(describeRedis(target)).toEqual({
      variable: 'REDIS_SENTINELS',
      where: 'master "mymaster" of the Sentinels 10.0.0.1:26379,sentinel-2.internal:26380,[::1]:26381',
    });
  });

  it('takes the master name from REDIS_SENTINEL_NAME', () => {
    const env = loadEnv({ REDIS_SENTINELS: '10.0.0.1:26379', REDIS_SENTINEL_NAME: 'cloudops-main' });
    expect(redisTarget(env).sentinelName).toBe('cloudops-main');
  });

  it('stops on an MCP_ALLOWED_ORIGINS entry that is not a web origin, naming it; null is never one', () => {
    for (const entry of [
      'localhost:3000',
      'agents.example.com',
      'file:///srv/page.html',
      'ftp://agents.example.com',
      'null',
      'https://',
    ]) {
      const error = failure({ MCP_ALLOWED_ORIGINS: `https://ok.example.com, ${entry}` });
      expect(error.message).toMatch(/^MCP_ALLOWED_ORIGINS: /);
      expect(error.message).toContain(`“${entry}”`);
      expect(error.message).not.toContain('\n');
    }
    const env = loadEnv({ MCP_ALLOWED_ORIGINS: 'https://agents.example.com, http://localhost:3000/' });
    expect(env.MCP_ALLOWED_ORIGINS).toBe('https://agents.example.com, http://localhost:3000/');
  });

  it('stops on REDIS_SENTINEL_NAME without REDIS_SENTINELS, naming both', () => {
    const error = failure({ REDIS_SENTINEL_NAME: 'cloudops-main' });
    expect(error.message).toMatch(/^REDIS_SENTINEL_NAME: set without REDIS_SENTINELS/);
    expect(error.message).not.toContain('\n');
  });

  it('resends on READONLY and NOREPLICAS (a failover under way), nothing else', () => {
    expect(reconnectOnError(new Error("READONLY You can't write against a read only replica."))).toBe(2);
    expect(reconnectOnError(new Error('NOREPLICAS Not enough good replicas to write.'))).toBe(2);
    expect(
      reconnectOnError(new Error('WRONGTYPE Operation against a key holding the wrong kind of value')),
    ).toBe(false);
  });
});

describe('Redis Cluster', () => {
  it('reads REDIS_CLUSTER_NODES as host:port pairs and names them in messages', () => {
    const env = loadEnv({
      REDIS_CLUSTER_NODES: 'node-1.cache:6379, 10.0.0.2:6380',
      REDIS_URL: 'redis://:pw@x',
    });
    const target = redisTarget(env);
    expect(target.clusterNodes).toEqual([
      { host: 'node-1.cache', port: 6379 },
      { host: '10.0.0.2', port: 6380 },
    ]);
    expect(describeRedis(target)).toEqual({
      variable: 'REDIS_CLUSTER_NODES',
      where: 'the Redis Cluster at node-1.cache:6379,10.0.0.2:6380',
    });
  });

  it('puts REDIS_PREFIX in one hash tag on a cluster only: elsewhere the key names stay as they were', () => {
    expect(redisKeyPrefix(loadEnv({ REDIS_CLUSTER_NODES: '10.0.0.1:6379' }))).toBe('{cloudops}');
    expect(redisKeyPrefix(loadEnv({ REDIS_CLUSTER_NODES: '10.0.0.1:6379', REDIS_PREFIX: 'ops-eu' }))).toBe(
      '{ops-eu}',
    );
    expect(redisKeyPrefix(loadEnv({}))).toBe('cloudops');
    expect(redisKeyPrefix(loadEnv({ REDIS_SENTINELS: '10.0.0.1:26379' }))).toBe('cloudops');
  });

  it.each([
    [{ REDIS_CLUSTER_NODES: 'node-1' }, /^REDIS_CLUSTER_NODES: expected host:port of cluster nodes/],
    [
      { REDIS_CLUSTER_NODES: '10.0.0.1:6379', REDIS_SENTINELS: '10.0.0.1:26379' },
      /^REDIS_CLUSTER_NODES: set together with REDIS_SENTINELS/,
    ],
    [
      { REDIS_CLUSTER_NODES: '10.0.0.1:6379', REDIS_URL: 'redis://:secret-pw@x/3' },
      /^REDIS_URL: a Redis Cluster has database 0 only/,
    ],
    [{ REDIS_TLS_CA_FILE: '/etc/ca.pem' }, /^REDIS_TLS_CA_FILE: set, but REDIS_URL does not ask for TLS/],
  ])('refuses %j in one line, without the password', (env, message) => {
    const error = failure(env);
    expect(error.message).toMatch(message);
    expect(error.message).not.toContain('secret-pw');
    expect(error.message).not.toContain('\n');
  });

  it('reads REDIS_TLS_CA_FILE for rediss://, and names the variable when the file is not there', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cloudops-ca-'));
    const ca = join(dir, 'ca.pem');
    writeFileSync(ca, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
    const target = redisTarget(loadEnv({ REDIS_URL: 'rediss://:pw@cache:6380', REDIS_TLS_CA_FILE: ca }));
    expect(String(tlsOptions(target)?.ca)).toContain('BEGIN CERTIFICATE');
    expect(tlsOptions(redisTarget(loadEnv({ REDIS_URL: 'rediss://cache:6380' })))).toEqual({});
    expect(tlsOptions(redisTarget(loadEnv({ REDIS_URL: 'redis://cache:6379' })))).toBeUndefined();
    const missing = redisTarget(
      loadEnv({ REDIS_URL: 'rediss://cache:6380', REDIS_TLS_CA_FILE: join(dir, 'gone.pem') }),
    );
    expect(() => tlsOptions(missing)).toThrow(/^REDIS_TLS_CA_FILE: cannot read .*gone\.pem \(ENOENT\)$/);
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('loadEnv: change tickets', () => {
  it('takes Jira Cloud (email + API token), Jira Data Center (a token) and ServiceNow (all three)', () => {
    const env = loadEnv({
      JIRA_URL: 'https://example.atlassian.net/',
      JIRA_EMAIL: 'bot@example.com',
      JIRA_API_TOKEN: 'atl-token',
      SERVICENOW_URL: 'https://example.service-now.com',
      SERVICENOW_USER: 'cloudops',
      SERVICENOW_PASSWORD: 'pw',
    });
    expect(env.JIRA_URL).toBe('https://example.atlassian.net');
    expect(loadEnv({ JIRA_URL: 'https://jira.corp.example', JIRA_TOKEN: 'pat' }).JIRA_TOKEN).toBe('pat');
  });

  it('refuses half a configuration, both Jira credentials at once, and plain http off this machine, never echoing a value', () => {
    const error = failure({
      JIRA_URL: 'http://jira.corp.example',
      JIRA_EMAIL: 'bot@example.com',
      JIRA_API_TOKEN: 'secret-api-token',
      JIRA_TOKEN: 'secret-pat',
      SERVICENOW_USER: 'cloudops',
    });
    expect(error.problems.map((p) => p.split(':')[0])).toEqual(['JIRA_URL']);
    const second = failure({
      JIRA_URL: 'https://j.example',
      JIRA_API_TOKEN: 'secret-api-token',
      JIRA_TOKEN: 'secret-pat',
      SERVICENOW_USER: 'u',
    });
    expect(second.problems.map((p) => p.split(':')[0])).toEqual([
      'JIRA_API_TOKEN',
      'JIRA_TOKEN',
      'SERVICENOW_USER',
    ]);
    for (const e of [error, second]) {
      expect(e.message).not.toContain('secret-api-token');
      expect(e.message).not.toContain('secret-pat');
    }
    expect(failure({ JIRA_URL: 'https://j.example' }).problems[0]).toMatch(
      /^JIRA_URL: set without credentials/,
    );
  });
});

describe('missingForRole', () => {
  const base = {
    SLACK_BOT_TOKEN: 'xoxb-1',
    CLOUD_API_URL: 'http://127.0.0.1:1',
    CLOUD_API_KEY: 'k',
    SEAL_KEY: TEST_SEAL_KEY,
  };

  it('a web role with neither Slack mode set is asked for Socket Mode (as the manifest ships); a worker for neither', () => {
    expect(missingForRole(loadEnv(base))).toEqual(['SLACK_APP_TOKEN']);
    expect(missingForRole(loadEnv({ ...base, SLACK_SIGNING_SECRET: 's' }))).toEqual([]);
    expect(missingForRole(loadEnv({ ...base, SLACK_APP_TOKEN: 'xapp-1' }))).toEqual([]);
    expect(missingForRole(loadEnv({ ...base, ROLE: 'worker' }))).toEqual([]);
  });

  it('every role needs SEAL_KEY, and the line says how to make one', () => {
    for (const role of ['all', 'web', 'worker', 'scheduler'])
      expect(
        missingForRole(loadEnv({ ...base, SEAL_KEY: undefined, SLACK_APP_TOKEN: 'xapp-1', ROLE: role })),
      ).toEqual(['SEAL_KEY']);
    const env = loadEnv({ ...base, SEAL_KEY: undefined, ROLE: 'worker' });
    expect(missingLine(env, missingForRole(env))).toMatch(
      /^missing SEAL_KEY\. SEAL_KEY seals every approval: at least 32 random bytes, e\.g\. from openssl rand -hex 32\./,
    );
  });

  it('names every missing variable', () => {
    expect(missingForRole(loadEnv({ ROLE: 'scheduler' }))).toEqual([
      'SLACK_BOT_TOKEN',
      'CLOUD_API_URL',
      'CLOUD_API_KEY',
      'SEAL_KEY',
    ]);
  });
});
