import type { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  cancelExecution,
  createQueues,
  EVENTS_MAX_LEN,
  enqueueExecution,
  enqueueNotify,
  type Queues,
} from '../../src/jobs/queues.ts';
import { NotReplicatedError, ReplicaAck } from '../../src/jobs/replica-ack.ts';
import { FAST_VM_LOCK } from '../../src/jobs/retry-policy.ts';
import { SendMarkers } from '../../src/jobs/send-markers.ts';
import { VmLock } from '../../src/jobs/vm-lock.ts';
import { LuaScript } from '../../src/requests/store/lua.ts';
import { RequestStore } from '../../src/requests/store/store.ts';
import { resizeRequest } from '../fixtures/requests.ts';
import { deleteKeys, testRedis, uniquePrefix } from '../helpers/redis.ts';

let redis: Redis;
let prefix: string;
let queues: Queues;
let store: RequestStore;

beforeEach(() => {
  redis = testRedis();
  prefix = uniquePrefix('jobs-queues');
  queues = createQueues(redis, prefix);
  store = new RequestStore(redis, { prefix });
});

afterEach(async () => {
  await queues.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

describe('queues', () => {
  it("keeps each queue's events stream near EVENTS_MAX_LEN entries, not BullMQ's 10,000, however many jobs pass", async () => {
    // The queue writes its settings to Redis once connected; every later XADD trims to them.
    await expect
      .poll(() => redis.hget(`${prefix}:notify:meta`, 'opts.maxLenEvents'))
      .toBe(String(EVENTS_MAX_LEN));
    // 1,500 jobs add about 3,000 events (added, waiting); nothing reads the stream.
    await queues.notify.addBulk(
      Array.from({ length: 1500 }, (_, i) => ({
        name: 'sync-message',
        data: { type: 'sync-message', requestId: `r${i}` },
      })),
    );
    const length = await redis.xlen(`${prefix}:notify:events`);
    expect(length).toBeGreaterThan(0);
    // Trimming is approximate (whole stream nodes of 100 entries).
    expect(length).toBeLessThanOrEqual(EVENTS_MAX_LEN + 200);
  });

  it('adds one execute job per request, however often it is enqueued', async () => {
    const request = await store.create(resizeRequest({ state: 'queued' }), 'U0DEV');
    const now = new Date();
    await Promise.all([1, 2, 3].map(() => enqueueExecution(queues, request, now)));
    expect(await queues.execute.getJobCounts('wait', 'delayed')).toEqual({ wait: 1, delayed: 0 });
    const job = await queues.execute.getJob(request.id);
    // The VM rides along so the worker takes its lock before reading the request, and the request as stored so the
    // run's start can predict its move to sending.
    expect(job?.data).toEqual({
      requestId: request.id,
      vm: { projectUuid: request.projectUuid, vmid: request.vmid },
      request,
    });
  });

  it('delays a scheduled request until its runAt, and cancel removes it', async () => {
    const now = new Date();
    const request = await store.create(
      resizeRequest({ state: 'queued', runAt: new Date(now.getTime() + 3_600_000).toISOString() }),
      'U0DEV',
    );
    await enqueueExecution(queues, request, now);
    const job = await queues.execute.getJob(request.id);
    expect(await job?.getState()).toBe('delayed');
    // It starts from whatever is stored when it runs: no copy rides along.
    expect(job?.data.request).toBeUndefined();
    expect(job?.opts.delay).toBe(3_600_000);
    await cancelExecution(queues, request.id);
    expect(await queues.execute.getJob(request.id)).toBeUndefined();
  });

  it('gives thread replies and posts ids BullMQ accepts, so a duplicate is a no-op', async () => {
    for (let i = 0; i < 2; i++) {
      await enqueueNotify(queues, { type: 'post-request', requestId: 'RABC1234' });
      await enqueueNotify(queues, {
        type: 'thread-reply',
        requestId: 'RABC1234',
        event: 'step_succeeded',
        step: 0,
      });
      await enqueueNotify(queues, { type: 'thread-reply', requestId: 'RABC1234', event: 'succeeded' });
    }
    await enqueueNotify(queues, { type: 'sync-message', requestId: 'RABC1234' });
    await enqueueNotify(queues, { type: 'sync-message', requestId: 'RABC1234' });
    const ids = (await queues.notify.getJobs(['wait'])).map((j) => j.id).sort();
    expect(ids.filter((id) => !/^\d+$/.test(id ?? ''))).toEqual([
      'post-request.RABC1234',
      'reply.RABC1234.step_succeeded.0',
      'reply.RABC1234.succeeded.0',
    ]);
    expect(ids).toHaveLength(5);
  });
});

describe('VmLock', () => {
  it('lets one holder per VM in, frees on release, and never frees a lock another holder took', async () => {
    const lock = new VmLock(redis, prefix, FAST_VM_LOCK);
    const first = await lock.acquire('P', 1);
    expect(first).toBeDefined();
    expect(await lock.acquire('P', 1)).toBeUndefined();
    const other = await lock.acquire('P', 2);
    expect(other).toBeDefined();
    await first?.release();
    const second = await lock.acquire('P', 1);
    expect(second).toBeDefined();
    await first?.release();
    expect(await lock.acquire('P', 1)).toBeUndefined();
    await second?.release();
    await other?.release();
  });

  it('runs its script under the lock it takes, and reads nothing when the lock is taken', async () => {
    const lock = new VmLock(redis, prefix, FAST_VM_LOCK);
    const read = new LuaScript(`
if not redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then return {0} end
return {1, redis.call('GET', KEYS[2])}
`);
    await redis.set(`${prefix}:probe`, 'value');
    const taken = await lock.acquireWith('P', 4, read, [`${prefix}:probe`], []);
    expect(taken?.reply).toEqual([1, 'value']);
    expect(await lock.acquireWith('P', 4, read, [`${prefix}:probe`], [])).toBeUndefined();
    expect(await lock.acquire('P', 4)).toBeUndefined();
    await taken?.lock.release();
    const again = await lock.acquireWith('P', 4, read, [`${prefix}:absent`], []);
    expect(again?.reply).toEqual([1, null]);
    await again?.lock.release();
  });

  it('sets a send marker only while the lock is held, once', async () => {
    const lock = new VmLock(redis, prefix, FAST_VM_LOCK);
    const markers = new SendMarkers(redis, prefix);
    const held = await lock.acquire('P', 5);
    if (!held) throw new Error('lock not taken');
    expect(await markers.markHolding(held, 'R1', 0, new Date())).toBe('set');
    expect(await markers.markHolding(held, 'R1', 0, new Date())).toBe('exists');
    // Another holder took the lock after ours expired: nothing is set and the lock is reported lost.
    await redis.set(`${prefix}:vmlock:p:5`, 'someone-else');
    expect(await markers.markHolding(held, 'R1', 1, new Date())).toBe('lost');
    expect(held.held).toBe(false);
    expect(await redis.exists(`${prefix}:sending:R1:1`)).toBe(0);
    await held.release();
    expect(await redis.get(`${prefix}:vmlock:p:5`)).toBe('someone-else');
  });

  it('keeps a held lock while WAITs hold its connection (a failover), renewing it on a connection of its own', async () => {
    const renewals = redis.duplicate();
    try {
      const lock = new VmLock(redis, prefix, FAST_VM_LOCK, renewals);
      const held = await lock.acquire('P', 6);
      expect(held).toBeDefined();
      // No replica follows this Redis: every WAIT holds the connection for its whole second, as after a failover
      // while no replica follows the new master. Five runs settling at once keep five WAITs queued on it, so a
      // renewal sent on it would wait about five seconds: longer than the lock lives.
      const ack = new ReplicaAck(redis, () => 1, 1000);
      const settling = Array.from({ length: 5 }, (_, i) =>
        ack.durably(() => redis.set(`${prefix}:settled:${i}`, '1'), FAST_VM_LOCK.ttlMs * 2),
      );
      for (const run of settling) await expect(run).rejects.toThrow(NotReplicatedError);
      expect(held?.held).toBe(true);
      expect(await lock.acquire('P', 6)).toBeUndefined();
      await held?.release();
    } finally {
      renewals.disconnect();
    }
  });

  it('keeps a held lock alive past its TTL by renewing it', async () => {
    const lock = new VmLock(redis, prefix, FAST_VM_LOCK);
    const held = await lock.acquire('P', 3);
    await new Promise((r) => setTimeout(r, FAST_VM_LOCK.ttlMs * 2));
    expect(held?.held).toBe(true);
    expect(await lock.acquire('P', 3)).toBeUndefined();
    await held?.release();
  });
});
