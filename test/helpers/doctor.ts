import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { expect } from 'vitest';
import { type CloudSim, startCloudSim } from '../../sim/cloud/server.ts';
import { type LocalRedis, startLocalRedis } from '../../sim/local-redis.ts';
import { type SlackStandIn, startSlackStandIn } from '../../sim/slack/server.ts';
import { BOT_SCOPES } from '../../src/doctor/scopes.ts';
import { runProcess } from './run-process.ts';
import { TEST_SEAL_KEY } from './seal.ts';

/*
 * `cloudops doctor` as an operator runs it: the shipped binary in a child process (dist/, built by the global setup),
 * against the cloud simulator, the Slack stand-in and a Redis server of the test file's own, with a policy file in a
 * directory of its own.
 */

const BIN = join(fileURLToPath(new URL('../../', import.meta.url)), 'bin', 'cloudops.mjs');

export const BOT_TOKEN = 'xoxb-doctor-test-5d1e';
export const APP_TOKEN = 'xapp-1-doctor-test-77aa';
export const API_KEY = 'doctor-test-key-9c2b41';
export const MANIFEST_SCOPES = Object.keys(BOT_SCOPES);
/** The world's Redis asks for this password (requirepass), as a deployment's should. */
export const REDIS_PASSWORD = 'doctor-redis-pw-6b0e';

export interface Check {
  id: string;
  status: 'ok' | 'warn' | 'fail';
  summary: string;
  fix?: string;
}
export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface DoctorWorld {
  cloud: CloudSim;
  slack: SlackStandIn;
  /** Redis with an append-only file and a password (REDIS_PASSWORD), as the doctor wants it; `url` has none. */
  redis: LocalRedis;
  /** The directory the doctor runs in; policy.yml there is the policy. */
  dir: string;
  /** `cloudops doctor <args>` with the world's environment, `overrides` over it. */
  doctor(args: string[], overrides?: Record<string, string>): Promise<Run>;
  /** `doctor --json`: the checks, with no secret anywhere in the output. */
  checks(overrides?: Record<string, string>): Promise<{ code: number | null; checks: Check[] }>;
  close(): Promise<void>;
}

/**
 * Starts the world the doctor checks: everything good (the bot's scopes and the channel scopes granted, user group
 * S0OPS resolving, a policy with one project in two channels). `secrets` are more values no output may contain.
 */
export async function startDoctorWorld(tmpPrefix: string, secrets: string[] = []): Promise<DoctorWorld> {
  const [cloud, slack, redis] = await Promise.all([
    startCloudSim({ apiKey: API_KEY }),
    startSlackStandIn({
      botToken: BOT_TOKEN,
      appToken: APP_TOKEN,
      scopes: [...MANIFEST_SCOPES, 'channels:read', 'groups:read'],
    }),
    startLocalRedis({ appendOnly: true }),
  ]);
  slack.setUserGroup('S0OPS', ['U0ALICE', 'U0BOB']);
  const admin = new Redis(redis.url);
  await admin.config('SET', 'requirepass', REDIS_PASSWORD);
  admin.disconnect();
  const dir = await mkdtemp(join(tmpdir(), tmpPrefix));
  await writeFile(
    join(dir, 'policy.yml'),
    `approvers: [U0ADMIN, S0OPS]
currency: CHF
projects:
  - name: shop-prod
    uuid: 0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10
    cluster: zone-1
    channels: [C0PROD, C0OPS]
    vms: []
`,
  );
  const env = {
    SLACK_BOT_TOKEN: BOT_TOKEN,
    SLACK_APP_TOKEN: APP_TOKEN,
    SLACK_API_URL: slack.apiUrl,
    CLOUD_API_URL: cloud.url,
    CLOUD_API_KEY: API_KEY,
    SEAL_KEY: TEST_SEAL_KEY,
    REDIS_URL: redis.url.replace('redis://', `redis://:${REDIS_PASSWORD}@`),
    POLICY_FILE: join(dir, 'policy.yml'),
  };
  const doctor = (args: string[], overrides: Record<string, string> = {}): Promise<Run> =>
    runProcess(process.execPath, [BIN, 'doctor', ...args], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env, ...overrides },
    });
  return {
    cloud,
    slack,
    redis,
    dir,
    doctor,
    async checks(overrides = {}) {
      const run = await doctor(['--json'], overrides);
      expect(run.stderr).toBe('');
      for (const secret of [BOT_TOKEN, APP_TOKEN, API_KEY, REDIS_PASSWORD, ...secrets])
        expect(run.stdout).not.toContain(secret);
      const out = JSON.parse(run.stdout) as { ok: boolean; checks: Check[] };
      expect(out.ok).toBe(run.code === 0);
      return { code: run.code, checks: out.checks };
    },
    async close() {
      await Promise.all([cloud.close(), slack.close(), redis.stop()]);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export const byId = (list: Check[], id: string) => list.filter((c) => c.id === id);
export const one = (list: Check[], id: string): Check => {
  const found = byId(list, id);
  expect(found, `${id} in ${JSON.stringify(list)}`).toHaveLength(1);
  return found[0]!;
};
