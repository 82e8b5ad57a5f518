import { createHmac, timingSafeEqual } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CloudSim, startCloudSim } from '../../sim/cloud/server.ts';
import { type SlackStandIn, startSlackStandIn } from '../../sim/slack/server.ts';
import type { ShippedAuditEntry } from '../../src/audit-export/batch.ts';
import { sealKeysFrom } from '../../src/config/seal-keys.ts';
import { parseAuditFile } from '../../src/requests/audit/read.ts';
import { verifyChain } from '../../src/requests/audit/verify.ts';
import { requestKeys } from '../../src/requests/store/keys.ts';
import { RequestStore } from '../../src/requests/store/store.ts';
import { resizeRequest } from '../fixtures/requests.ts';
import { type BotProcess, spawnBot } from '../helpers/bot-process.ts';
import { deleteKeys, testRedis, testRedisUrl, uniquePrefix } from '../helpers/redis.ts';
import { TEST_SEAL_KEY } from '../helpers/seal.ts';

// At least once through the receiver's outage and the bot's restart (docs/operations.md#audit-export): the receiver,
// a real HTTP server on loopback, goes down; the bot keeps writing, is stopped and started again while it is down;
// once it is back every audit entry of the stream has arrived, in signed JSON arrays, none missing.
const BOT_TOKEN = 'xoxb-0000-0000-auditexport';
const API_KEY = 'audit-export-key-7c1d';
const SECRET = 'audit-export-secret-5b0e9a1c';

/** A batch as the receiver got it. */
interface Received {
  body: string;
  signature: string | undefined;
  timestamp: string | undefined;
}

/** A log receiver that can be taken down (connections refused) and brought back on the same port. */
class Receiver {
  readonly batches: Received[] = [];
  private server: Server | undefined;
  port = 0;
  private waiters: (() => void)[] = [];

  async up(): Promise<void> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const signature = req.headers['x-cloudops-signature'];
        const timestamp = req.headers['x-cloudops-timestamp'];
        this.batches.push({
          body: Buffer.concat(chunks).toString(),
          signature: typeof signature === 'string' ? signature : undefined,
          timestamp: typeof timestamp === 'string' ? timestamp : undefined,
        });
        res.writeHead(204).end();
        for (const wake of this.waiters.splice(0)) wake();
      });
    });
    server.listen(this.port, '127.0.0.1');
    await once(server, 'listening');
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  async down(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }

  entries(): ShippedAuditEntry[] {
    return this.batches.flatMap((b) => JSON.parse(b.body) as ShippedAuditEntry[]);
  }

  /** Resolves once `done` holds, checked after each batch. */
  async until(done: () => boolean, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`receiver: not done after ${this.batches.length} batches`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 500);
      });
    }
  }
}

/** Resolves once the bot's stdout has a line with `msg`. */
async function logged(bot: BotProcess, msg: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!bot.stdout().includes(`"msg":"${msg}`)) {
    if (Date.now() > deadline || bot.child.exitCode !== null)
      throw new Error(`no "${msg}" line: ${bot.stdout().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const lines = (bot: BotProcess, msg: string) =>
  bot
    .stdout()
    .split('\n')
    .filter((line) => line.includes(`"msg":"${msg}`));

let dir: string;
let redis: Redis;
let prefix: string;
let slack: SlackStandIn;
let sim: CloudSim;
const receiver = new Receiver();
const bots: BotProcess[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cloudops-audit-export-'));
  await writeFile(join(dir, 'policy.yml'), 'approvers: [U0ADMIN]\n');
  redis = testRedis();
  prefix = uniquePrefix('audit-export');
  [slack, sim] = await Promise.all([
    startSlackStandIn({ botToken: BOT_TOKEN }),
    startCloudSim({ apiKey: API_KEY }),
    receiver.up(),
  ]);
});
afterAll(async () => {
  for (const bot of bots) bot.kill('SIGKILL');
  await Promise.all(bots.map((bot) => bot.exited));
  await Promise.all([slack?.close(), sim?.close(), receiver.down()]);
  await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(dir, { recursive: true, force: true });
});

async function startBot(): Promise<BotProcess> {
  const bot = spawnBot(
    {
      SLACK_BOT_TOKEN: BOT_TOKEN,
      SLACK_SIGNING_SECRET: 'audit-export-signing-secret',
      SLACK_API_URL: slack.apiUrl,
      CLOUD_API_URL: sim.url,
      CLOUD_API_KEY: API_KEY,
      SEAL_KEY: TEST_SEAL_KEY,
      POLICY_FILE: join(dir, 'policy.yml'),
      REDIS_URL: testRedisUrl(),
      REDIS_PREFIX: prefix,
      PORT: '0',
      AUDIT_WEBHOOK_URL: `http://127.0.0.1:${receiver.port}/cloudops-audit`,
      AUDIT_WEBHOOK_SECRET: SECRET,
    },
    dir,
  );
  bots.push(bot);
  await bot.ready();
  return bot;
}

/** Requests made as the bot's lifecycle makes them: each writes its audit entries to the stream. */
async function makeRequests(count: number): Promise<void> {
  const store = new RequestStore(redis, {
    prefix,
    audit: { sealer: sealKeysFrom(TEST_SEAL_KEY), policyVersion: () => null },
  });
  for (let i = 0; i < count; i++) {
    const request = await store.create(resizeRequest(), 'U0DEV', 'rule: one approver');
    await store.transition(request.id, {
      from: ['pending'],
      to: 'rejected',
      actor: 'U0LEAD',
      detail: 'not now',
    });
  }
}

async function streamIds(): Promise<string[]> {
  return (await redis.xrange(requestKeys(prefix).audit, '-', '+')).map(([id]) => id);
}

describe('the audit export through a receiver outage and a restart', { timeout: 150_000 }, () => {
  it('delivers every entry, signed, once the receiver is back', async () => {
    const first = await startBot();
    await makeRequests(3);
    const before = await streamIds();
    await receiver.until(() => before.every((id) => receiver.entries().some((e) => e.id === id)), 30_000);

    await receiver.down();
    await makeRequests(3);
    await logged(first, 'audit export failing');
    // Stopped and started again while the receiver is still down, with entries written in between.
    first.kill('SIGTERM');
    expect((await first.ends()).code).toBe(0);
    await makeRequests(2);
    const second = await startBot();
    await logged(second, 'audit export failing');
    await makeRequests(1);

    await receiver.up();
    const all = await streamIds();
    expect(all.length).toBe(9 * 3);
    await receiver.until(() => all.every((id) => receiver.entries().some((e) => e.id === id)), 90_000);
    await logged(second, 'audit export delivering again');

    // Every batch is a JSON array, signed with the secret over its timestamp and exact body.
    for (const batch of receiver.batches) {
      const signed = `${batch.timestamp}.${batch.body}`;
      const expected = `sha256=${createHmac('sha256', SECRET).update(signed).digest('hex')}`;
      expect(batch.signature).toBeDefined();
      expect(timingSafeEqual(Buffer.from(batch.signature ?? ''), Buffer.from(expected))).toBe(true);
      expect(Array.isArray(JSON.parse(batch.body))).toBe(true);
    }
    const shipped = receiver.entries();
    // Duplicates are allowed (at least once); none is missing, none is made up.
    expect([...new Set(shipped.map((e) => e.id))].sort()).toEqual([...all].sort());
    const rejected = shipped.find((e) => e.act === 'rejected');
    expect(rejected).toMatchObject({ actor: 'U0LEAD', details: 'not now' });
    expect(rejected?.request_id).toMatch(/^[A-Z0-9]{8}$/);
    expect(Number.isNaN(Date.parse(rejected?.time ?? ''))).toBe(false);
    expect(shipped.find((e) => e.act === 'created')?.details).toBe('rule: one approver');
    // What the receiver kept is the chain itself: its batches, as they came, verify with the seals.
    const copy = parseAuditFile(receiver.batches.map((b) => b.body).join('\n'));
    expect(verifyChain(copy, { sealer: sealKeysFrom(TEST_SEAL_KEY), openStart: true })).toMatchObject({
      ok: true,
      checked: all.length,
    });

    // One line when the receiver stopped answering and one when it took batches again, not one per retry.
    expect(lines(first, 'audit export failing')).toHaveLength(1);
    expect(lines(second, 'audit export failing')).toHaveLength(1);
    expect(lines(second, 'audit export delivering again')).toHaveLength(1);
    const back = JSON.parse(lines(second, 'audit export delivering again')[0]!) as { failedAttempts: number };
    expect(back.failedAttempts).toBeGreaterThanOrEqual(1);

    // The backlog gauge is back to 0 (the shipper sets it after each round).
    const metricsPort = (
      JSON.parse(lines(second, 'cloudops ready')[0]!) as {
        metricsPort: number;
      }
    ).metricsPort;
    const deadline = Date.now() + 10_000;
    for (;;) {
      const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      if (/^cloudops_audit_export_backlog 0$/m.test(text)) break;
      if (Date.now() > deadline) throw new Error(`backlog not 0:\n${text.match(/^cloudops_audit.*$/gm)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    if (process.env.AUDIT_SAMPLE)
      await writeFile(process.env.AUDIT_SAMPLE, receiver.batches.at(-1)?.body ?? '');
  });
});
