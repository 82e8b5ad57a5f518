import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CloudSim, startCloudSim } from '../../sim/cloud/server.ts';
import { type SlackStandIn, startSlackStandIn } from '../../sim/slack/server.ts';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { requestKeys } from '../../src/requests/store/keys.ts';
import { type BotProcess, spawnBot } from '../helpers/bot-process.ts';
import { deleteKeys, testRedis, testRedisUrl, uniquePrefix } from '../helpers/redis.ts';
import { type FlowBot, submitRequest } from '../helpers/request-flow.ts';

// The policy read again without a restart (docs/policy.md#reload): SIGHUP to a bot process, and POLICY_WATCH=1 with a
// ConfigMap's symlink swap. The pid stays, /readyz shows the new version, the next request follows the new rule, a
// broken file keeps the old policy with one log line, and each change is audited once.
const TEAM = 'T0RELOAD';
const CHANNEL = 'C0RELOAD';
const BOT_TOKEN = 'xoxb-0000-0000-reload';
const SIGNING = 'reload-signing-secret-0123456789';
const API_KEY = 'reload-api-key-55aa';
const SEAL_KEY = 'ab'.repeat(32);

const policy = (extra: string) => `workspace: ${TEAM}
currency: EUR
approvers: [U0LEAD, U0SECOND]
${extra}
projects:
  - name: shop-prod
    uuid: 0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10
    cluster: zone-1
    channels: [${CHANNEL}]
    vms:
      - { vmid: 101, name: web-1, ha: true, cores: 2, ram_gb: 4, os_disk_gb: 50, wan_mode: ipv4 }
`;
const V1 = policy('');
const V2 = policy('approvals: { count: 2 }');
const version = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 12);

let dir: string;
let redis: Redis;
let slack: SlackStandIn;
let sim: CloudSim;
const bots: BotProcess[] = [];
const prefixes: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cloudops-reload-'));
  redis = testRedis();
  [slack, sim] = await Promise.all([
    startSlackStandIn({ botToken: BOT_TOKEN, teamId: TEAM }),
    startCloudSim({ apiKey: API_KEY }),
  ]);
});
afterAll(async () => {
  for (const bot of bots) bot.kill('SIGKILL');
  await Promise.all(bots.map((bot) => bot.exited));
  await Promise.all([slack?.close(), sim?.close()]);
  for (const prefix of prefixes) await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(dir, { recursive: true, force: true });
});

async function start(policyFile: string, extra: Record<string, string> = {}) {
  const prefix = uniquePrefix('reload');
  prefixes.push(prefix);
  const bot = spawnBot(
    {
      SLACK_BOT_TOKEN: BOT_TOKEN,
      SLACK_SIGNING_SECRET: SIGNING,
      SLACK_API_URL: slack.apiUrl,
      CLOUD_API_URL: sim.url,
      CLOUD_API_KEY: API_KEY,
      POLICY_FILE: policyFile,
      REDIS_URL: testRedisUrl(),
      REDIS_PREFIX: prefix,
      SEAL_KEY,
      PORT: '0',
      LOG_LEVEL: 'info',
      ...extra,
    },
    dir,
  );
  bots.push(bot);
  const port = await bot.ready();
  const flow: FlowBot = {
    url: `http://127.0.0.1:${port}`,
    signingSecret: SIGNING,
    slack,
    team: TEAM,
    channel: CHANNEL,
  };
  return { bot, prefix, flow };
}

const readyz = async (flow: FlowBot) =>
  (await (await fetch(`${flow.url}/readyz`)).json()) as { status: string; policyVersion: string };

async function until<T>(what: () => Promise<T | undefined> | T | undefined, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await what();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}

const stored = async (prefix: string, id: string) =>
  JSON.parse((await redis.get(requestKeys(prefix).request(id))) as string) as CloudRequest;

/** The audit entries as records (chained entries carry their whole JSON in `e`). */
const auditRecords = async (prefix: string) =>
  (await redis.xrange(requestKeys(prefix).audit, '-', '+')).map(
    ([, fields]) => JSON.parse(fields[fields.indexOf('e') + 1] as string) as Record<string, unknown>,
  );

describe('SIGHUP', () => {
  it('a valid file replaces the policy in the running process: same pid, new version, the next request follows it, audited once', async () => {
    const file = join(dir, 'sighup.yml');
    await writeFile(file, V1);
    const { bot, prefix, flow } = await start(file);
    const pid = bot.child.pid;
    expect((await readyz(flow)).policyVersion).toBe(version(V1));
    const before = await submitRequest(flow, 'U0DEV', 'resize shop-prod 101 cores=4');
    expect((await stored(prefix, before.requestId)).requiredApprovals ?? 1).toBe(1);

    await writeFile(file, V2);
    bot.kill('SIGHUP');
    await until(async () => ((await readyz(flow)).policyVersion === version(V2) ? true : undefined));
    expect(bot.child.pid).toBe(pid);
    expect(bot.child.exitCode).toBeNull();
    const after = await submitRequest(flow, 'U0DEV', 'resize shop-prod 101 cores=6');
    expect((await stored(prefix, after.requestId)).requiredApprovals).toBe(2);

    const records = await auditRecords(prefix);
    const changes = records.filter((r) => r.act === 'policy_changed');
    expect(changes).toEqual([
      expect.objectContaining({
        actor: 'cloudops',
        policy_version: version(V2),
        details: `policy ${version(V1)} → ${version(V2)}: approvals changed`,
      }),
    ]);
    // Each decision names the version that judged it.
    expect(records.filter((r) => r.request_id === before.requestId).map((r) => r.policy_version)).toEqual([
      version(V1),
      version(V1),
    ]);
    expect(records.filter((r) => r.request_id === after.requestId).map((r) => r.policy_version)).toEqual([
      version(V2),
      version(V2),
    ]);
    // The same file again changes nothing and writes nothing.
    bot.kill('SIGHUP');
    await until(() => (bot.stdout().includes('policy reloaded: unchanged') ? true : undefined));
    expect((await auditRecords(prefix)).filter((r) => r.act === 'policy_changed')).toHaveLength(1);
  });

  it('an invalid file keeps the old policy and logs one line naming the problem', async () => {
    const file = join(dir, 'invalid.yml');
    await writeFile(file, V1);
    const { bot, prefix, flow } = await start(file);
    await writeFile(file, `${V1}\nretention_days: forever\n`);
    bot.kill('SIGHUP');
    const line = await until(() =>
      bot
        .stdout()
        .split('\n')
        .find((l) => l.includes('policy not reloaded')),
    );
    expect(JSON.parse(line)).toMatchObject({ level: 'error', version: version(V1) });
    expect(JSON.parse(line).msg).toMatch(
      new RegExp(
        `^policy not reloaded, keeping version ${version(V1)}: .*invalid\\.yml:\\d+.*retention_days`,
      ),
    );
    expect(
      bot
        .stdout()
        .split('\n')
        .filter((l) => l.includes('policy not reloaded')),
    ).toHaveLength(1);
    expect((await readyz(flow)).policyVersion).toBe(version(V1));
    expect(bot.child.exitCode).toBeNull();
    // A file cut short mid-write (half a YAML document) is refused the same way.
    await writeFile(file, V1.slice(0, V1.indexOf('vms:') + 12));
    bot.kill('SIGHUP');
    await until(() =>
      bot
        .stdout()
        .split('\n')
        .filter((l) => l.includes('policy not reloaded')).length === 2
        ? true
        : undefined,
    );
    expect((await readyz(flow)).policyVersion).toBe(version(V1));
    expect((await auditRecords(prefix)).filter((r) => r.act === 'policy_changed')).toEqual([]);
  });
});

describe('POLICY_WATCH=1', () => {
  it('follows a ConfigMap-style symlink swap without a signal', async () => {
    // kubelet's layout: policy.yml → ..data/policy.yml, ..data → ..<timestamp>; an update swaps ..data.
    const mount = join(dir, 'mount');
    await mkdir(join(mount, '..v1'), { recursive: true });
    await writeFile(join(mount, '..v1', 'policy.yml'), V1);
    await symlink('..v1', join(mount, '..data'));
    await symlink(join('..data', 'policy.yml'), join(mount, 'policy.yml'));
    const { bot, flow } = await start(join(mount, 'policy.yml'), { POLICY_WATCH: '1' });
    expect((await readyz(flow)).policyVersion).toBe(version(V1));

    await mkdir(join(mount, '..v2'));
    await writeFile(join(mount, '..v2', 'policy.yml'), V2);
    await symlink('..v2', join(mount, '..data_tmp'));
    await rename(join(mount, '..data_tmp'), join(mount, '..data'));
    await until(async () => ((await readyz(flow)).policyVersion === version(V2) ? true : undefined));
    expect(bot.child.exitCode).toBeNull();
  });
});
