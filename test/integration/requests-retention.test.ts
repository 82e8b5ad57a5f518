import { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AuditCursor } from '../../src/audit-export/cursor.ts';
import { createQueues, enqueueNotify, KEEP_FINISHED, type Queues } from '../../src/jobs/queues.ts';
import { sweepRetention } from '../../src/jobs/retention-sweeper.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { AuditLog } from '../../src/requests/audit/audit.ts';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { requestKeys } from '../../src/requests/store/keys.ts';
import { RequestStore } from '../../src/requests/store/store.ts';
import { resizeRequest } from '../fixtures/requests.ts';
import { deleteKeys, testRedis, uniquePrefix } from '../helpers/redis.ts';

const DAY = 86_400_000;
let redis: Redis;
let prefix: string;
let clock: Date;
let store: RequestStore;
let audit: AuditLog;

beforeEach(() => {
  redis = testRedis();
  prefix = uniquePrefix('retention');
  clock = new Date('2025-03-01T10:00:00Z');
  store = new RequestStore(redis, { prefix, now: () => clock, retentionDays: 30, auditRetentionDays: 30 });
  audit = new AuditLog(redis, prefix);
});
afterEach(async () => {
  await deleteKeys(redis, prefix);
  await redis.quit();
});

const advance = (ms: number) => {
  clock = new Date(clock.getTime() + ms);
};

/** A request taken through approval and a successful run, ending now. */
async function succeeded(): Promise<CloudRequest> {
  const created = await store.create(resizeRequest(), 'U0DEV');
  await store.transition(created.id, { from: ['pending'], to: 'approved', actor: 'U0LEAD' });
  await store.transition(created.id, { from: ['approved'], to: 'queued', actor: 'cloudops' });
  await store.transition(created.id, { from: ['queued'], to: 'sending', actor: 'cloudops' });
  const done = await store.transition(created.id, { from: ['sending'], to: 'succeeded', actor: 'cloudops' });
  if (!done.ok) throw new Error('could not finish the request');
  return done.request;
}

describe('RequestStore retention', () => {
  it('removes an ended request and its channel entry retention_days after it ended, and audit entries audit_retention_days after they were written', async () => {
    const ended = await succeeded();
    advance(10 * DAY);
    // A later write (the message ts) does not restart the retention period.
    await store.update(ended.id, { messageTs: '1700000000.000100' });
    const live = await store.create(resizeRequest(), 'U0DEV');
    expect((await audit.read({ requestId: ended.id })).length).toBe(6);

    advance(20 * DAY - 1000);
    expect(await store.removeExpired()).toBe(0);
    expect(await store.get(ended.id)).toBeDefined();

    advance(2000);
    expect(await store.removeExpired()).toBe(1);
    expect(await store.get(ended.id)).toBeUndefined();
    expect((await store.listByChannel('C0PROD')).map((r) => r.id)).toEqual([live.id]);
    // The live request created ten days later keeps the audit from its creation on; the ended one's is gone.
    expect(await audit.read({ requestId: ended.id })).toEqual([]);
    expect((await audit.read({ requestId: live.id })).map((e) => e.state)).toEqual(['created', 'pending']);

    // A pending request is never removed, however old; its audit entries follow their own retention.
    advance(400 * DAY);
    expect(await store.removeExpired()).toBe(0);
    expect(await store.get(live.id)).toBeDefined();
    expect(await audit.read({ requestId: live.id })).toEqual([]);
    const keys = requestKeys(prefix);
    expect(await redis.zcard(keys.retention)).toBe(0);
    expect(await redis.zrange(keys.created, 0, -1)).toEqual([live.id]);
  });

  it('keeps a request with an open lease, and counts retention from when the lease closed', async () => {
    const ended = await succeeded();
    await store.update(ended.id, { leaseOpen: true });
    advance(20 * DAY);
    expect(await store.removeExpired()).toBe(0);
    expect(await store.get(ended.id)).toBeDefined();
    expect(await audit.read({ requestId: ended.id })).toHaveLength(6);
    advance(80 * DAY);
    expect(await store.removeExpired()).toBe(0);
    expect(await store.get(ended.id)).toBeDefined();

    await store.update(ended.id, { leaseOpen: false });
    advance(29 * DAY);
    expect(await store.removeExpired()).toBe(0);
    advance(2 * DAY);
    expect(await store.removeExpired()).toBe(1);
    expect(await store.get(ended.id)).toBeUndefined();
    expect(await audit.read()).toEqual([]);
  });

  it('removes many expired requests in batches and leaves the index empty', async () => {
    const ids = await Promise.all(Array.from({ length: 120 }, () => succeeded().then((r) => r.id)));
    advance(31 * DAY);
    const queues = createQueues(redis, prefix);
    const removed = await sweepRetention(
      { store, queues, logger: createLogger({ level: 'silent' }) },
      { intervalMs: 1000, batch: 50, finishedJobAgeMs: DAY },
    ).finally(() => queues.close());
    expect(removed.requests).toBe(120);
    expect(
      (await redis.mget(ids.map((id) => requestKeys(prefix).request(id)))).every((v) => v === null),
    ).toBe(true);
    expect(await redis.exists(requestKeys(prefix).retention, requestKeys(prefix).created)).toBe(0);
    // The stream stays (empty) so its last id keeps later entries in order.
    expect(await redis.xlen(requestKeys(prefix).audit)).toBe(0);
  });
});

describe('audit entries the audit export has not shipped', () => {
  /** A silent-free logger whose lines the test reads. */
  function capture() {
    const lines: { level: string; msg: string; unshipped?: number }[] = [];
    const logger = createLogger(
      { level: 'info' },
      {
        write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]),
      },
    );
    return { lines, logger };
  }
  const sweep = async (on: RequestStore, logger: ReturnType<typeof createLogger>) => {
    const queues = createQueues(redis, prefix);
    await sweepRetention(
      { store: on, queues, logger },
      { intervalMs: 1000, batch: 50, finishedJobAgeMs: DAY },
    ).finally(() => queues.close());
  };

  it('are kept past retention_days while the export is on, with one warning naming how many, and go once shipped', async () => {
    const exporting = new RequestStore(redis, {
      prefix,
      now: () => clock,
      retentionDays: 30,
      auditRetentionDays: 30,
      exportsAudit: true,
    });
    const cursor = new AuditCursor(redis, prefix);
    await cursor.ensureGroup();
    const shipped = await succeeded();
    await cursor.ack((await cursor.take(100)).ids);
    const unshipped = await succeeded();
    advance(31 * DAY);
    const { lines, logger } = capture();
    await sweep(exporting, logger);
    // Both requests are gone; the shipped one's audit entries too, the unshipped one's stay.
    expect(await store.get(shipped.id)).toBeUndefined();
    expect(await store.get(unshipped.id)).toBeUndefined();
    expect(await audit.read({ requestId: shipped.id })).toEqual([]);
    expect(await audit.read({ requestId: unshipped.id })).toHaveLength(6);
    expect(lines.filter((l) => l.msg.startsWith('retention kept audit entries'))).toMatchObject([
      { level: 'warn', unshipped: 6 },
    ]);

    await cursor.ack((await cursor.take(100)).ids);
    expect(await cursor.backlog()).toBe(0);
    await sweep(exporting, capture().logger);
    expect(await redis.xlen(requestKeys(prefix).audit)).toBe(0);
  });

  it('keeps everything while the export is on but has not started yet', async () => {
    const exporting = new RequestStore(redis, {
      prefix,
      now: () => clock,
      retentionDays: 30,
      auditRetentionDays: 30,
      exportsAudit: true,
    });
    await succeeded();
    advance(31 * DAY);
    await sweep(exporting, capture().logger);
    expect(await redis.xlen(requestKeys(prefix).audit)).toBe(6);
  });

  it('are removed with an error naming how many when the export was turned off', async () => {
    const cursor = new AuditCursor(redis, prefix);
    await cursor.ensureGroup();
    await succeeded();
    advance(31 * DAY);
    const { lines, logger } = capture();
    await sweep(store, logger);
    expect(await redis.xlen(requestKeys(prefix).audit)).toBe(0);
    expect(lines.filter((l) => l.msg.startsWith('retention removed audit entries'))).toMatchObject([
      { level: 'error', unshipped: 6 },
    ]);
  });
});

describe('finished jobs', () => {
  let queues: Queues;
  beforeEach(() => {
    queues = createQueues(redis, prefix);
  });
  afterEach(async () => {
    await queues.close();
  });

  it('carry a day and a count cap, and the sweep removes finished ones past their age even when the queue went quiet', async () => {
    await enqueueNotify(queues, { type: 'sync-message', requestId: 'RETAIN01' });
    const connection = redis.duplicate();
    const worker = new Worker('notify', async () => 'done', { connection, prefix });
    try {
      await new Promise<void>((resolve) => worker.once('completed', () => resolve()));
    } finally {
      await worker.close();
      await connection.quit();
    }
    const [job] = await queues.notify.getCompleted();
    expect(job?.opts.removeOnComplete).toEqual({ age: KEEP_FINISHED.ageS, count: KEEP_FINISHED.completed });
    expect(job?.opts.removeOnFail).toEqual({ age: KEEP_FINISHED.ageS, count: KEEP_FINISHED.failed });

    const logger = createLogger({ level: 'silent' });
    const kept = await sweepRetention(
      { store, queues, logger },
      { intervalMs: 1000, batch: 50, finishedJobAgeMs: DAY },
    );
    expect(kept.jobs).toBe(0);
    const swept = await sweepRetention(
      { store, queues, logger },
      { intervalMs: 1000, batch: 50, finishedJobAgeMs: 0 },
    );
    expect(swept.jobs).toBe(1);
    expect(await queues.notify.getCompletedCount()).toBe(0);
  });
});
