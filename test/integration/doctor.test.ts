import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CloudSim } from '../../sim/cloud/server.ts';
import { freePort, type LocalRedis, startLocalRedis } from '../../sim/local-redis.ts';
import { startSentinelGroup } from '../../sim/local-sentinel.ts';
import type { SlackStandIn } from '../../sim/slack/server.ts';
import { BOT_SCOPES } from '../../src/doctor/scopes.ts';
import { RequestStore } from '../../src/requests/store/store.ts';
import { resizeRequest } from '../fixtures/requests.ts';
import {
  API_KEY,
  byId,
  type DoctorWorld,
  MANIFEST_SCOPES,
  one,
  REDIS_PASSWORD,
  startDoctorWorld,
} from '../helpers/doctor.ts';
import { startForwardProxy, startRefusingProxy } from '../helpers/proxies.ts';
import { deleteKeys } from '../helpers/redis.ts';
import { approveSealed, TEST_SEAL_KEY, TEST_SEAL_KEY_PREVIOUS } from '../helpers/seal.ts';

// `cloudops doctor` as an operator runs it: the shipped binary in a child process (dist/, built by the global
// setup), against the cloud simulator, the Slack stand-in and Redis servers of this file's own.

let world: DoctorWorld;
let cloud: CloudSim;
let slack: SlackStandIn;
let redis: LocalRedis;
let evicting: LocalRedis;
let dir: string;

const doctor = (args: string[], overrides?: Record<string, string>) => world.doctor(args, overrides);
const checks = (overrides?: Record<string, string>) => world.checks(overrides);

beforeAll(async () => {
  [world, evicting] = await Promise.all([
    startDoctorWorld('cloudops-doctor-', ['wrong-key-31337', 'xoxb-wrong-4242']),
    // The wrong policy for a queue: under memory pressure Redis would delete jobs and requests.
    startLocalRedis({ extraArgs: ['--maxmemory-policy', 'allkeys-lru'] }),
  ]);
  ({ cloud, slack, redis, dir } = world);
});

afterAll(async () => {
  await Promise.all([world?.close(), evicting?.stop()]);
});

describe('cloudops doctor', () => {
  it('all good: one ✓ line per check, exit 0', async () => {
    const run = await doctor([]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const lines = run.stdout.trimEnd().split('\n');
    expect(
      lines.every((line) => line.startsWith('✓ ')),
      run.stdout,
    ).toBe(true);
    for (const part of [
      /^✓ Node\.js 2[4-9]\./m,
      /^✓ policy .*: 1 project\(s\), 2 channel\(s\)$/m,
      /^✓ Redis answers at redis:\/\/127\.0\.0\.1:\d+/m,
      /^✓ Redis asks for a password$/m,
      /^✓ Redis is on this machine \(loopback\)$/m,
      /^✓ Redis maxmemory-policy is noeviction$/m,
      /^✓ Redis persistence: append-only file on$/m,
      /^✓ SLACK_BOT_TOKEN works: bot @cloudops/m,
      new RegExp(`^✓ bot scopes: all ${Object.keys(BOT_SCOPES).length} that manifest.yml asks$`, 'm'),
      /^✓ SLACK_APP_TOKEN opens a Socket Mode connection$/m,
      /^✓ user groups resolve: S0OPS$/m,
      /^✓ the bot is in C0PROD, C0OPS$/m,
      /^✓ cloud API answers at http:\/\/127\.0\.0\.1:\d+: 3 cluster\(s\) listed$/m,
      /^✓ cloud API accepts CLOUD_API_KEY$/m,
      /^✓ clock within \d+ s of Slack and the cloud API$/m,
    ])
      expect(run.stdout).toMatch(part);
    expect(lines).toHaveLength(16);
    // The key went only to the authenticated read, and Slack saw auth.test and apps.connections.open.
    expect(cloud.calls.filter((c) => c.headers.authorization === `Bearer ${API_KEY}`).length).toBeGreaterThan(
      0,
    );
    expect(slack.callsOf('apps.connections.open').length).toBeGreaterThan(0);
  });

  it('--json: the same checks for a machine, every status ok', async () => {
    const { code, checks: list } = await checks();
    expect(code).toBe(0);
    expect(list.map((c) => c.id)).toEqual([
      'node',
      'environment',
      'policy',
      'redis',
      'redis.password',
      'redis.tls',
      'redis.maxmemory-policy',
      'redis.persistence',
      'slack.bot-token',
      'slack.scopes',
      'slack.app-token',
      'slack.user-groups',
      'slack.channels',
      'cloud.reachable',
      'cloud.api-key',
      'clock',
    ]);
    expect(list.every((c) => c.status === 'ok')).toBe(true);
  });

  it('with a proxy: each Slack and cloud check names the proxy it went through, or says NO_PROXY sent it directly', async () => {
    const proxy = await startForwardProxy();
    try {
      const run = await doctor([], {
        HTTPS_PROXY: `http://ops:s3cret@127.0.0.1:${proxy.port}`,
        HTTP_PROXY: proxy.url,
      });
      expect(run.code, run.stdout).toBe(0);
      const via = `[proxy http://127.0.0.1:${proxy.port}]`;
      for (const line of run.stdout
        .split('\n')
        .filter((l) => /Slack|SLACK|cloud API|user groups|the bot is in/.test(l) && !l.includes(' clock ')))
        expect(line.endsWith(via), line).toBe(true);
      expect(run.stdout).not.toContain('s3cret');
      expect(proxy.calls.map((c) => new URL(c.target).pathname)).toEqual(
        expect.arrayContaining(['/api/auth.test', '/api/apps.connections.open', '/cloud/cluster/']),
      );

      const seen = proxy.calls.length;
      const direct = await doctor([], { http_proxy: proxy.url, NO_PROXY: '127.0.0.1' });
      expect(direct.code, direct.stdout).toBe(0);
      expect(direct.stdout).toMatch(/^✓ cloud API accepts CLOUD_API_KEY \[direct \(NO_PROXY\)\]$/m);
      expect(direct.stdout).toMatch(/^✓ SLACK_BOT_TOKEN works: .*\[direct \(NO_PROXY\)\]$/m);
      expect(proxy.calls.length).toBe(seen);
    } finally {
      await proxy.close();
    }
  });

  it('a proxy asking for a password: each Slack and cloud check says so, with the proxy’s advice and no password', async () => {
    const proxy = await startRefusingProxy(407);
    try {
      const run = await doctor([], {
        HTTPS_PROXY: `http://ops:s3cret@127.0.0.1:${proxy.port}`,
        HTTP_PROXY: `http://ops:s3cret@127.0.0.1:${proxy.port}`,
      });
      expect(run.code).toBe(1);
      expect(run.stdout).toMatch(
        /^✗ Slack could not be reached at \S+: the proxy asked for authentication \(HTTP 407\)/m,
      );
      expect(run.stdout).toMatch(
        /^✗ cloud API: http:\/\/127\.0\.0\.1:\d+ could not be reached: the proxy asked for authentication \(HTTP 407\)/m,
      );
      expect(run.stdout).toContain('check the user and password in HTTPS_PROXY / HTTP_PROXY');
      for (const wrong of ['UND_ERR', 'SLACK_API_URL', 'CLOUD_API_URL', 's3cret'])
        expect(run.stdout + run.stderr).not.toContain(wrong);
      expect(proxy.calls.length).toBeGreaterThan(0);
    } finally {
      await proxy.close();
    }
  });

  it('Redis with maxmemory-policy allkeys-lru and no persistence: ✗ with what to set, ! for persistence, exit 1', async () => {
    const run = await doctor([], { REDIS_URL: evicting.url });
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(
      /^✗ Redis maxmemory-policy is allkeys-lru: .* → set maxmemory-policy noeviction/m,
    );
    expect(run.stdout).toMatch(/^! Redis persistence: off: .* → set appendonly yes/m);
  });

  it('Redis that answers without a password: ! saying whoever reaches it can run changes, and what to set', async () => {
    const run = await doctor([], { REDIS_URL: evicting.url });
    expect(run.stdout).toMatch(
      new RegExp(
        `^! Redis accepts connections without a password \\(127\\.0\\.0\\.1:${evicting.port}\\): whoever reaches it can approve and run changes → give Redis a password or an ACL user .*REDIS_URL`,
        'm',
      ),
    );
    // Loopback: no warning about TLS.
    expect(run.stdout).toMatch(/^✓ Redis is on this machine \(loopback\)$/m);
  });

  it('an ACL user with a password, but the default user still open: ! all the same', async () => {
    const admin = new Redis(evicting.url);
    try {
      await admin.call('ACL', 'SETUSER', 'cloudops', 'on', '>acl-pw-90d1', '~*', '&*', '+@all');
      const { checks: list } = await checks({
        REDIS_URL: evicting.url.replace('redis://', 'redis://cloudops:acl-pw-90d1@'),
      });
      expect(one(list, 'redis').status).toBe('ok');
      expect(one(list, 'redis.password').status).toBe('warn');
      // Once the default user is off, the same URL is fine.
      await admin.call('ACL', 'SETUSER', 'default', 'off');
      const after = await checks({
        REDIS_URL: evicting.url.replace('redis://', 'redis://cloudops:acl-pw-90d1@'),
      });
      expect(one(after.checks, 'redis.password')).toMatchObject({
        status: 'ok',
        summary: 'Redis asks for a password',
      });
    } finally {
      await admin.call('AUTH', 'cloudops', 'acl-pw-90d1').catch(() => undefined);
      await admin
        .call('ACL', 'SETUSER', 'default', 'on', 'nopass', '~*', '&*', '+@all')
        .catch(() => undefined);
      await admin.call('ACL', 'DELUSER', 'cloudops').catch(() => undefined);
      admin.disconnect();
    }
  });

  it("a password in REDIS_URL's query (?password=, which ioredis honours) is printed by neither output", async () => {
    const port = await freePort();
    const url = `redis://127.0.0.1:${port}/0?password=query-pw-41c7&db=0`;
    const text = await doctor([], { REDIS_URL: url });
    const json = await doctor(['--json'], { REDIS_URL: url });
    for (const run of [text, json]) {
      expect(run.code).toBe(1);
      expect(run.stdout + run.stderr).toContain(`127.0.0.1:${port}`);
      expect(run.stdout + run.stderr).not.toContain('query-pw-41c7');
    }
  });

  it("credentials in SLACK_API_URL or CLOUD_API_URL (a gateway's user:password@ or ?token=) are printed by neither output", async () => {
    const port = await freePort();
    const overrides = {
      SLACK_API_URL: `http://gw-user:gw-pass-8e1f@127.0.0.1:${port}/api/?token=gw-token-77d2`,
      CLOUD_API_URL: `http://cloud-user:cloud-pass-3a9c@127.0.0.1:${port}/?api_key=cloud-query-5b20`,
    };
    for (const run of [await doctor([], overrides), await doctor(['--json'], overrides)]) {
      expect(run.code).toBe(1);
      expect(run.stdout + run.stderr).toContain(`127.0.0.1:${port}`);
      for (const secret of [
        'gw-user',
        'gw-pass-8e1f',
        'gw-token-77d2',
        'cloud-pass-3a9c',
        'cloud-query-5b20',
      ])
        expect(run.stdout + run.stderr).not.toContain(secret);
    }
  });

  it('REDIS_SENTINELS naming a Redis, not a Sentinel: ✗ saying so and what to set, not "no answer"', async () => {
    const address = redis.url.replace('redis://', '');
    const { code, checks: list } = await checks({ REDIS_SENTINELS: address });
    expect(code).toBe(1);
    const check = one(list, 'redis');
    expect(check.status).toBe('fail');
    expect(check.summary).toBe(
      `REDIS_SENTINELS: ${address} is a Redis, not a Sentinel: set REDIS_URL to it instead (and leave REDIS_SENTINELS empty), or give the Sentinels' addresses (port 26379 unless changed)`,
    );
    expect(check.fix).toContain('REDIS_URL');
  });

  it('REDIS_URL naming a Sentinel: ✗ saying so and what to set, not "Redis answers"', async () => {
    const group = await startSentinelGroup({ replicas: 0, sentinels: 1, quorum: 1 });
    try {
      const { code, checks: list } = await checks({ REDIS_URL: `redis://${group.sentinels}` });
      expect(code).toBe(1);
      const check = one(list, 'redis');
      expect(check.status).toBe('fail');
      expect(check.summary).toBe(
        `REDIS_URL: the Redis at redis://${group.sentinels} is a Sentinel: set REDIS_SENTINELS to the Sentinels (host:port,host:port,…) and keep only the password and TLS in REDIS_URL`,
      );
      expect(check.fix).toContain('REDIS_SENTINELS');
    } finally {
      await group.stop();
    }
  });

  it('during a SEAL_KEY rotation: counts the pending work sealed with SEAL_KEY_PREVIOUS, and says when it may go', async () => {
    const client = new Redis(redis.url, { password: REDIS_PASSWORD });
    const prefix = 'doctor-seals';
    try {
      const store = new RequestStore(client, { prefix });
      // Approved under the key that is now the previous one, not yet run; and one that ended (it does not count).
      await approveSealed(store, await store.create(resizeRequest(), 'U0DEV'), 'U0LEAD', { queue: false });
      const ended = await approveSealed(store, await store.create(resizeRequest(), 'U0DEV'), 'U0LEAD');
      await store.transition(ended.id, { from: ['queued'], to: 'cancelled', actor: 'U0DEV' });
      const rotating = {
        REDIS_PREFIX: prefix,
        SEAL_KEY: TEST_SEAL_KEY_PREVIOUS,
        SEAL_KEY_PREVIOUS: TEST_SEAL_KEY,
      };
      const during = one((await checks(rotating)).checks, 'seal.previous');
      expect(during.status).toBe('warn');
      expect(during.summary).toMatch(
        /^1 pending request\(s\) carry seals of SEAL_KEY_PREVIOUS \(key [0-9a-f]{12}\)$/,
      );
      expect(during.fix).toContain('keep SEAL_KEY_PREVIOUS until they have run or ended');

      await deleteKeys(client, prefix);
      const after = one((await checks(rotating)).checks, 'seal.previous');
      expect(after.status).toBe('ok');
      expect(after.summary).toContain('it may be removed');
      // No rotation under way: no such check.
      expect(byId((await checks({ REDIS_PREFIX: prefix })).checks, 'seal.previous')).toEqual([]);
    } finally {
      await deleteKeys(client, prefix);
      client.disconnect();
    }
  });

  it('no Redis answering: ✗ naming REDIS_URL', async () => {
    const port = await freePort();
    const { code, checks: list } = await checks({ REDIS_URL: `redis://127.0.0.1:${port}` });
    expect(code).toBe(1);
    const check = one(list, 'redis');
    expect(check.status).toBe('fail');
    expect(check.summary).toContain(`redis://127.0.0.1:${port}`);
    expect(check.fix).toContain('REDIS_URL');
    expect(byId(list, 'redis.maxmemory-policy')).toEqual([]);
  });

  it('Slack granted fewer scopes than the manifest asks: ✗ naming each, and the user group that needs one', async () => {
    slack.grantScopes(['commands', 'channels:history', 'groups:history', 'channels:read']);
    try {
      const { code, checks: list } = await checks();
      expect(code).toBe(1);
      const scopes = one(list, 'slack.scopes');
      expect(scopes.status).toBe('fail');
      expect(scopes.summary).toMatch(/^bot scopes missing: chat:write, for .*; usergroups:read, for /);
      expect(scopes.fix).toMatch(/reinstall/);
      const groups = one(list, 'slack.user-groups');
      expect(groups).toMatchObject({ status: 'fail' });
      expect(groups.summary).toContain('missing_scope');
    } finally {
      slack.grantScopes([...MANIFEST_SCOPES, 'channels:read', 'groups:read']);
    }
  });

  it('a bot token Slack refuses: ✗ with where to copy the right one', async () => {
    const { code, checks: list } = await checks({ SLACK_BOT_TOKEN: 'xoxb-wrong-4242' });
    expect(code).toBe(1);
    const check = one(list, 'slack.bot-token');
    expect(check).toMatchObject({ status: 'fail' });
    expect(check.summary).toContain('invalid_auth');
    expect(check.fix).toMatch(/OAuth & Permissions/);
  });

  it('an app token Slack refuses for Socket Mode: ✗', async () => {
    const { code, checks: list } = await checks({ SLACK_APP_TOKEN: 'xapp-1-wrong-4242' });
    expect(code).toBe(1);
    const check = one(list, 'slack.app-token');
    expect(check.status).toBe('fail');
    expect(check.summary).toContain('invalid_auth');
    expect(check.fix).toMatch(/connections:write/);
  });

  it('a user group Slack does not resolve: ✗ naming it', async () => {
    slack.setUserGroup('S0OPS', { error: 'no_such_subteam' });
    try {
      const { code, checks: list } = await checks();
      expect(code).toBe(1);
      expect(one(list, 'slack.user-groups')).toMatchObject({
        status: 'fail',
        summary: expect.stringContaining('S0OPS does not resolve (no_such_subteam)'),
      });
    } finally {
      slack.setUserGroup('S0OPS', ['U0ALICE', 'U0BOB']);
    }
  });

  it('a policy channel the bot is not in: ✗ with the invite; without channels:read, a warning naming the scope', async () => {
    slack.leaveChannel('C0OPS');
    const { code, checks: list } = await checks();
    expect(code).toBe(1);
    const channels = byId(list, 'slack.channels');
    expect(channels.map((c) => c.status)).toEqual(['ok', 'fail']);
    expect(channels[1]?.summary).toMatch(/not in #c0ops \(C0OPS\)/);
    expect(channels[1]?.fix).toContain('/invite @cloudops');

    slack.joinChannel('C0OPS');
    slack.grantScopes(MANIFEST_SCOPES);
    try {
      const without = await checks();
      const check = one(without.checks, 'slack.channels');
      expect(check.status).toBe('warn');
      expect(check.summary).toContain('channels:read');
      // The manifest's scopes alone: a warning does not fail the run.
      expect(without.code).toBe(0);
    } finally {
      slack.grantScopes([...MANIFEST_SCOPES, 'channels:read', 'groups:read']);
    }
  });

  it('the cloud API unreachable: ✗ naming CLOUD_API_URL', async () => {
    const port = await freePort();
    const { code, checks: list } = await checks({ CLOUD_API_URL: `http://127.0.0.1:${port}` });
    expect(code).toBe(1);
    const check = one(list, 'cloud.reachable');
    expect(check.status).toBe('fail');
    expect(check.summary).toContain('ECONNREFUSED');
    expect(check.fix).toContain('CLOUD_API_URL');
  });

  it('an API key the cloud API refuses: ✗ from an authenticated read', async () => {
    const { code, checks: list } = await checks({ CLOUD_API_KEY: 'wrong-key-31337' });
    expect(code).toBe(1);
    expect(one(list, 'cloud.reachable').status).toBe('ok');
    expect(one(list, 'cloud.api-key')).toMatchObject({
      status: 'fail',
      summary: expect.stringContaining('refused the key (HTTP 403)'),
      fix: expect.stringContaining('CLOUD_API_KEY'),
    });
  });

  it("clock skew: ✗ past 5 minutes against Slack's Date, ! past 30 s against the API's", async () => {
    slack.skewDate(10 * 60_000);
    try {
      const { checks: list } = await checks();
      const check = one(list, 'clock');
      expect(check.status).toBe('fail');
      // Date has whole seconds, and half the round trip is not known: a second or two either way.
      expect(check.summary).toMatch(/this machine is (59\d|60\d) s behind Slack/);
    } finally {
      slack.skewDate(0);
    }
    cloud.skewDate(-90_000);
    try {
      const { code, checks: list } = await checks();
      const check = one(list, 'clock');
      expect(check.status).toBe('warn');
      expect(check.summary).toMatch(/this machine is (8\d|9\d) s ahead of the cloud API/);
      expect(code, JSON.stringify(list)).toBe(0);
    } finally {
      cloud.skewDate(0);
    }
  });

  it('a policy with errors and a missing variable: ✗ for each, the policy problems counted in one line', async () => {
    const bad = join(dir, 'bad-policy.yml');
    await writeFile(bad, 'currency: CHF\nprojects: nope\nretention_days: soon\n');
    const { code, checks: list } = await checks({ POLICY_FILE: bad, SLACK_APP_TOKEN: '' });
    expect(code).toBe(1);
    expect(one(list, 'policy')).toMatchObject({
      status: 'fail',
      summary: expect.stringMatching(
        /^policy: .*bad-policy\.yml: 2 problems, the first: .*bad-policy\.yml:\d+: /,
      ),
    });
    expect(one(list, 'policy')?.summary).not.toContain('\n');
    // Neither Slack mode set: asked for Socket Mode's token, as the manifest ships, with HTTP mode named as the other way.
    expect(one(list, 'environment')).toMatchObject({
      status: 'fail',
      summary: 'environment (ROLE all): missing SLACK_APP_TOKEN',
      fix: expect.stringContaining('for HTTP mode set SLACK_SIGNING_SECRET instead'),
    });
  });

  it('several malformed variables: every one named, none of their values echoed, exit 1', async () => {
    const run = await doctor([], {
      PORT: 'SECRET-PORT',
      LOG_LEVEL: 'loud',
      REDIS_PREFIX: 'has space',
      SLACK_BOT_TOKEN: 'xoxp-not-a-bot-token-SECRET',
    });
    expect(run.code).toBe(1);
    const out = run.stdout + run.stderr;
    for (const name of ['PORT', 'LOG_LEVEL', 'REDIS_PREFIX', 'SLACK_BOT_TOKEN'])
      expect(out).toContain(`${name}: `);
    expect(out).toContain('4 variables are malformed');
    expect(out).not.toMatch(/SECRET/);
  });
});
