import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRedis, startLocalRedis } from '../../sim/local-redis.ts';
import { AgentControls } from '../../src/mcp/agent-state.ts';
import { readStoredChain } from '../../src/requests/audit/read.ts';
import { verifyChain } from '../../src/requests/audit/verify.ts';
import { CHANNELS, type Harness, PROD_UUID, startHarness, USERS } from '../helpers/harness.ts';
import { snapshotRedis } from '../helpers/redis.ts';
import { TEST_SEAL_KEYS } from '../helpers/seal.ts';

// docs/operations.md#backing-up-and-restoring-redis, followed: a bot on Redis A with work pending, a snapshot of A
// (BGSAVE, then the RDB file copied away), A gone, a new Redis B started from that file alone (a new process, a new
// directory, the same address as the bot's REDIS_URL), the bot restarted on B. Both Redis servers are this file's own.

let a: LocalRedis;
let b: LocalRedis | undefined;
let h: Harness;
let backup: string;

beforeAll(async () => {
  a = await startLocalRedis();
  backup = await mkdtemp(join(tmpdir(), 'cloudops-redis-backup-'));
  h = await startHarness({
    role: 'all',
    env: () => ({ REDIS_URL: a.url }),
    redisTarget: { url: a.url, sentinelName: 'mymaster' },
  });
}, 120_000);

afterAll(async () => {
  await h?.close();
  await b?.stop();
  await a?.stop();
  if (backup) await rm(backup, { recursive: true, force: true });
});

describe('restoring Redis from a snapshot', { timeout: 120_000 }, () => {
  it('a request pending at the snapshot is approved on the restored Redis and runs once; a disabled agent stays disabled', async () => {
    // Work in flight on A: a request waiting for its approval, and an agent an admin stopped.
    const ack = await h.fillAndSubmit('resize shop-prod 102 cores=6', { reason: 'restore drill' });
    expect(ack.json).toEqual({ response_action: 'clear' });
    const request = await h.waitForRequest((await h.nextRequest()).id, (r) => r.state === 'pending');
    const message = await h.requestMessage(request.id);
    // As `cloudops agents disable` with SEAL_KEY set: its audit entry is sealed like the bot's.
    const agents = new AgentControls(h.redis as Redis, h.prefix, () => new Date(), {
      sealer: TEST_SEAL_KEYS,
      policyVersion: () => null,
    });
    expect(await agents.setDisabled('deploy-bot', true, 'U0ADMIN')).toBe(true);

    // The backup: a snapshot of A, its RDB file copied away. Then A is gone, data directory and all.
    await snapshotRedis(a.url);
    await copyFile(join(a.dir, 'dump.rdb'), join(backup, 'dump.rdb'));
    const port = a.port;
    await a.stop();

    // The restore: a new Redis from the copied file, where the bot's REDIS_URL points; the bot started on it.
    b = await startLocalRedis({ port, extraArgs: ['--dir', backup, '--dbfilename', 'dump.rdb'] });
    expect(b.dir).not.toBe(a.dir);
    await h.restart();

    expect(await h.store.get(request.id)).toMatchObject({ id: request.id, state: 'pending' });
    expect(await new AgentControls(h.redis as Redis, h.prefix).isDisabled('deploy-bot')).toBe(true);
    const posts = () => h.sim.calls.filter((c) => c.method === 'POST' && c.path.includes('/vm/102/')).length;
    expect(posts()).toBe(0);

    await h.click('approve', request.id, USERS.lead, CHANNELS.prod, message);
    await h.waitForRequest(request.id, (r) => r.state === 'succeeded', 30_000);
    expect(h.sim.vm(PROD_UUID, 102).cores).toBe(6);
    // Once: a second approval changes nothing, and nothing else is sent.
    await h.click('approve', request.id, USERS.lead2, CHANNELS.prod, message);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(posts()).toBe(1);
    expect(h.sim.applied.filter((x) => x.vmid === 102)).toHaveLength(1);
    // The audit written before the snapshot is there, and the run after it follows.
    const audit = await h.auditOf(request.id);
    expect(audit[0]).toMatch(/^created /);
    expect(audit.at(-1)).toMatch(/^succeeded /);
    // The chain restored with the snapshot goes on where it stopped: every entry's hash and seal still check.
    const chain = await readStoredChain(h.redis, h.prefix);
    expect(
      verifyChain(chain.records, { head: chain.head, anchor: chain.anchor, sealer: TEST_SEAL_KEYS }),
    ).toMatchObject({ ok: true });
  });
});
