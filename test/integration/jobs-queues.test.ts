import type { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  cancelExecution,
  createQueues,
  enqueueExecution,
  enqueueNotify,
  type Queues,
} from '../../src/jobs/queues.ts';
import { FAST_VM_LOCK } from '../../src/jobs/retry-policy.ts';
import { VmLock } from '../../src/jobs/vm-lock.ts';
import { RequestStore } from '../../src/requests/store.ts';
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
  it('adds one execute job per request, however often it is enqueued', async () => {
    const request = await store.create(resizeRequest({ state: 'queued' }), 'U0DEV');
    const now = new Date();
    await Promise.all([1, 2, 3].map(() => enqueueExecution(queues, request, now)));
    expect(await queues.execute.getJobCounts('wait', 'delayed')).toEqual({ wait: 1, delayed: 0 });
    const job = await queues.execute.getJob(request.id);
    // The VM rides along so the worker takes its lock before reading the request.
    expect(job?.data).toEqual({
      requestId: request.id,
      vm: { projectUuid: request.projectUuid, vmid: request.vmid },
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

  it('keeps a held lock alive past its TTL by renewing it', async () => {
    const lock = new VmLock(redis, prefix, FAST_VM_LOCK);
    const held = await lock.acquire('P', 3);
    await new Promise((r) => setTimeout(r, FAST_VM_LOCK.ttlMs * 2));
    expect(held?.held).toBe(true);
    expect(await lock.acquire('P', 3)).toBeUndefined();
    await held?.release();
  });
});
