import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parsePolicy } from '../../src/config/policy.ts';
import { DueTimes, startDueScheduler } from '../../src/jobs/due-times.ts';
import { createOutbox } from '../../src/jobs/outbox.ts';
import { createQueues, type Queues, replyId } from '../../src/jobs/queues.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createMetrics } from '../../src/observability/metrics.ts';
import { createApprovalPolicy, type UserGroups } from '../../src/requests/approval/approvers.ts';
import { AuditLog } from '../../src/requests/audit/audit.ts';
import { endReturnedLease, type LeaseEnding, leaseItem } from '../../src/requests/leases.ts';
import { RequestLifecycle } from '../../src/requests/lifecycle/request-lifecycle.ts';
import type { LifecycleDeps } from '../../src/requests/lifecycle/types.ts';
import type { CloudRequest, Lease, ReplyEvent } from '../../src/requests/model/types.ts';
import { RequestStore } from '../../src/requests/store/store.ts';
import { VmFactsStore } from '../../src/requests/vm-facts.ts';
import { PROJECT, resizeRequest } from '../fixtures/requests.ts';
import { deleteKeys, testRedis, uniquePrefix } from '../helpers/redis.ts';

// The lifecycle on real Redis and BullMQ, without Bolt: counting approvals under concurrency, and due times.
const POLICY = parsePolicy(`
approvers: [U0A, U0B, U0C, U0D, U0E, S0GROUP]
projects:
  - name: ${PROJECT.name}
    uuid: ${PROJECT.uuid}
    channels: [C0PROD]
    approvals: { count: 3, remind_after_hours: 2, escalate_to: [U0BOSS] }
`);
/** A directory of one group, as Slack's usergroups.users.list would answer; lookups are counted. */
function directory(members: Record<string, string[]>): UserGroups & { lookups: number } {
  const groups = {
    lookups: 0,
    async members(group: string) {
      groups.lookups++;
      return members[group];
    },
  };
  return groups;
}

let redis: Redis;
let prefix: string;
let clock: Date;
let store: RequestStore;
let queues: Queues;
let due: DueTimes;
let lifecycleDeps: LifecycleDeps;
let lifecycle: RequestLifecycle;

beforeAll(() => {
  redis = testRedis();
});
afterAll(async () => {
  await redis.quit();
});
beforeEach(() => {
  prefix = uniquePrefix('approvals');
  clock = new Date('2026-11-25T10:00:00Z');
  const now = () => clock;
  store = new RequestStore(redis, { prefix, now });
  queues = createQueues(redis, prefix);
  due = queues.due;
  lifecycleDeps = {
    policy: POLICY,
    store,
    outbox: createOutbox(queues, now),
    approvals: createApprovalPolicy(POLICY, directory({ S0GROUP: ['U0G1', 'U0G2'] })),
    prices: { clusterPrices: async () => undefined, clusters: async () => [] },
    now,
    logger: createLogger({ level: 'silent' }),
    metrics: createMetrics(),
    vmFacts: new VmFactsStore(redis, { prefix }),
  };
  lifecycle = new RequestLifecycle(lifecycleDeps);
});
afterEach(async () => {
  await queues.close();
  await deleteKeys(redis, prefix);
});

async function pending(required: number): Promise<CloudRequest> {
  return store.create(
    resizeRequest({
      approvers: POLICY.approvers,
      requiredApprovals: required,
      approvals: [],
      expiresAt: new Date(clock.getTime() + 86_400_000).toISOString(),
      escalateTo: ['U0BOSS'],
    }),
    'U0DEV',
  );
}

async function executeJobs(requestId: string) {
  return (await queues.execute.getJobs(['waiting', 'delayed', 'active', 'completed', 'failed'])).filter(
    (j) => j.data.requestId === requestId,
  );
}

describe('N approvals on real Redis', () => {
  it('seven approvers clicking at once, each twice, on a 3-approval request: exactly three count, one job', async () => {
    const request = await pending(3);
    const people = ['U0A', 'U0B', 'U0C', 'U0D', 'U0E', 'U0G1', 'U0G2'];
    const decisions = await Promise.all(
      [...people, ...people].map((user) => lifecycle.approve(request, user)),
    );
    const stored = await store.get(request.id);
    expect(stored?.state).toBe('queued');
    expect(stored?.approvals).toHaveLength(3);
    expect(new Set(stored?.approvals?.map((a) => a.user)).size).toBe(3);
    expect(stored?.approvedBy).toBe(stored?.approvals?.[2]?.user);
    expect(decisions.filter((d) => d.ok)).toHaveLength(3);
    expect(await executeJobs(request.id)).toHaveLength(1);
    const audit = await new AuditLog(redis, prefix).read({ requestId: request.id });
    expect(audit.map((e) => e.state)).toEqual([
      'created',
      'pending',
      'approval',
      'approval',
      'approved',
      'queued',
    ]);
    expect(
      audit.filter((e) => e.state === 'approval' || e.state === 'approved').map((e) => e.detail),
    ).toEqual(['approval 1 of 3', 'approval 2 of 3', 'approval 3 of 3']);
  });

  it('the same approver clicking ten times at once counts once; the requester never counts', async () => {
    const request = await pending(2);
    const decisions = await Promise.all(Array.from({ length: 10 }, () => lifecycle.approve(request, 'U0A')));
    expect(decisions.filter((d) => d.ok)).toHaveLength(1);
    expect(decisions.filter((d) => !d.ok && d.refusal.code === 'already_approved')).toHaveLength(9);
    const own = await lifecycle.approve(request, 'U0DEV');
    expect(own).toEqual({ ok: false, refusal: { code: 'own_request' } });
    const stored = await store.get(request.id);
    expect(stored?.state).toBe('pending');
    expect(stored?.approvals?.map((a) => a.user)).toEqual(['U0A']);
    expect(await executeJobs(request.id)).toHaveLength(0);
  });

  it('someone outside the list and its groups is refused; a group member counts', async () => {
    const request = await pending(2);
    expect(await lifecycle.approve(request, 'U0STRANGER')).toMatchObject({
      ok: false,
      refusal: { code: 'not_approver' },
    });
    expect((await lifecycle.approve(request, 'U0G2')).ok).toBe(true);
  });
});

describe('due times', () => {
  it('each due item is taken once by several processes at once; one not marked done is due again after its lease', async () => {
    const others = [new DueTimes(testRedis(), prefix), new DueTimes(testRedis(), prefix)];
    for (let i = 0; i < 30; i++)
      await due.set({ kind: 'remind', requestId: `R${i}` }, new Date(clock.getTime() + i));
    await due.set({ kind: 'escalate', requestId: 'LATER' }, new Date(clock.getTime() + 3_600_000));
    const at = new Date(clock.getTime() + 60_000);
    const claims = await Promise.all([due, ...others, due, ...others].map((d) => d.claim(at, 30_000, 7)));
    const taken = claims.flat().map((c) => c.item.requestId);
    expect(taken.sort()).toEqual(Array.from({ length: 30 }, (_, i) => `R${i}`).sort());
    // Nothing is due again before the lease ends; after it, what was not done is.
    expect(await due.claim(new Date(at.getTime() + 29_000), 30_000, 100)).toEqual([]);
    for (const { item, token } of claims.flat().slice(0, 20)) await due.done(item, token);
    const again = await due.claim(new Date(at.getTime() + 31_000), 30_000, 100);
    expect(again).toHaveLength(10);
    // The ten taken again are held until their new lease ends, before the escalation an hour on.
    expect(await due.earliest()).toEqual(new Date(at.getTime() + 31_000 + 30_000));
    await Promise.all(others.map((d) => (d as unknown as { redis: Redis }).redis.quit()));
  });

  it('an item moved while it was being handled stays for its new time', async () => {
    const item = { kind: 'freeze-end' as const, requestId: 'F1' };
    await due.set(item, clock);
    const [claim] = await due.claim(clock, 30_000, 10);
    await due.set(item, new Date(clock.getTime() + 7_200_000));
    await due.done(item, claim!.token);
    expect(await due.when(item)).toEqual(new Date(clock.getTime() + 7_200_000));
  });

  it('a reminder and an escalation fall due once each, through the scheduler, and are audited', async () => {
    const created = await pending(2);
    // What the lifecycle schedules when it makes a request with remind_after_hours 2 and escalate_to.
    await due.set({ kind: 'remind', requestId: created.id }, new Date(clock.getTime() + 2 * 3_600_000));
    await due.set({ kind: 'escalate', requestId: created.id }, new Date(clock.getTime() + 18 * 3_600_000));
    const handled: string[] = [];
    const scheduler = startDueScheduler(
      {
        due,
        handlers: {
          remind: async (id) => {
            handled.push(`remind ${id}`);
            await lifecycle.remind(id);
          },
          escalate: async (id) => {
            handled.push(`escalate ${id}`);
            await lifecycle.escalate(id);
          },
          'freeze-end': (id) => lifecycle.endFreeze(id),
        },
        now: () => clock,
        logger: createLogger({ level: 'silent' }),
      },
      { pollMs: 10_000, leaseMs: 60_000, batch: 10 },
    );
    try {
      expect(await scheduler.tick()).toBe(0);
      clock = new Date(clock.getTime() + 2 * 3_600_000);
      expect(await scheduler.tick()).toBe(1);
      expect(await scheduler.tick()).toBe(0);
      expect((await store.get(created.id))?.remindedAt).toBe(clock.toISOString());
      expect(await queues.notify.getJob(`reply.${created.id}.reminder.0`)).toBeDefined();
      // Before the escalation U0BOSS may not approve; after it, they may.
      expect((await lifecycle.approve((await store.get(created.id))!, 'U0BOSS')).ok).toBe(false);
      clock = new Date(clock.getTime() + 16 * 3_600_000);
      expect(await scheduler.tick()).toBe(1);
      expect(await queues.notify.getJob(`reply.${created.id}.escalated.0`)).toBeDefined();
      expect((await lifecycle.approve((await store.get(created.id))!, 'U0BOSS')).ok).toBe(true);
      expect(handled).toEqual([`remind ${created.id}`, `escalate ${created.id}`]);
      const audit = await new AuditLog(redis, prefix).read({ requestId: created.id });
      expect(audit.map((e) => e.state)).toEqual(['created', 'pending', 'reminder', 'escalation', 'approval']);
      expect(await due.earliest()).toBeUndefined();
    } finally {
      await scheduler.stop();
    }
  });

  it('a reminder and an escalation noted by a process that stopped before announcing them are announced on the retry', async () => {
    const created = await pending(2);
    await due.set({ kind: 'remind', requestId: created.id }, clock);
    await due.set({ kind: 'escalate', requestId: created.id }, clock);
    // The first process writes the note, then stops before its announcement leaves (its outbox fails there).
    const stopping = new RequestLifecycle({
      ...lifecycleDeps,
      outbox: {
        ...lifecycleDeps.outbox,
        announce: async () => {
          throw new Error('the process stopped here');
        },
      },
    });
    const schedulerOf = (requests: RequestLifecycle) =>
      startDueScheduler(
        {
          due,
          handlers: { remind: (id) => requests.remind(id), escalate: (id) => requests.escalate(id) },
          now: () => clock,
          logger: createLogger({ level: 'silent' }),
        },
        { pollMs: 10_000, leaseMs: 60_000, batch: 10 },
      );
    // Each scheduler looks once as it starts; stopping it waits for that look.
    await schedulerOf(stopping).stop();
    const noted = await store.get(created.id);
    expect([noted?.remindedAt, noted?.escalatedAt]).toEqual([clock.toISOString(), clock.toISOString()]);
    expect(await queues.notify.getJob(`reply.${created.id}.reminder.0`)).toBeUndefined();

    // After the claim's lease another process takes both items again: each is announced once, noted once.
    clock = new Date(clock.getTime() + 61_000);
    await schedulerOf(lifecycle).stop();
    expect(await queues.notify.getJob(`reply.${created.id}.reminder.0`)).toBeDefined();
    expect(await queues.notify.getJob(`reply.${created.id}.escalated.0`)).toBeDefined();
    const audit = await new AuditLog(redis, prefix).read({ requestId: created.id });
    // Both fell due at the same time: either may have been noted first.
    expect(audit.map((e) => e.state).sort()).toEqual(['created', 'escalation', 'pending', 'reminder']);
    expect(await due.earliest()).toBeUndefined();
  });
});

describe('a lease stopped between its note and its announcement (issue 44)', () => {
  const HOUR = 3_600_000;
  const DAY = 24 * HOUR;
  /** The lifecycle of a process that stops right after its note: its announcement never leaves. */
  const stopping = () =>
    new RequestLifecycle({
      ...lifecycleDeps,
      outbox: {
        ...lifecycleDeps.outbox,
        announce: async () => {
          throw new Error('the process stopped here');
        },
      },
    });
  const schedulerOf = (requests: RequestLifecycle) =>
    startDueScheduler(
      {
        due,
        handlers: { lease: (id) => requests.leases.due(id) },
        now: () => clock,
        logger: createLogger({ level: 'silent' }),
      },
      { pollMs: 10_000, leaseMs: 60_000, batch: 10 },
    );
  /** A temporary increase that ran three days ago for two hours; its lease is open. */
  async function leased(lease: Partial<Lease> = {}): Promise<CloudRequest> {
    const input = resizeRequest({ state: 'queued', target: { cores: 4 } });
    if (input.params.kind === 'resize')
      input.params = { ...input.params, lease: { term: { hours: 2 }, returnTo: { cores: 2 } } };
    return succeeded(await store.create(input, 'U0DEV'), {
      leaseOpen: true,
      lease: {
        startedAt: new Date(clock.getTime() - 3 * DAY).toISOString(),
        endsAt: new Date(clock.getTime() - 3 * DAY + 2 * HOUR).toISOString(),
        ...lease,
      },
    });
  }
  /** `request` as its run's success write leaves it. */
  async function succeeded(request: CloudRequest, patch: Partial<CloudRequest> = {}): Promise<CloudRequest> {
    const sending = await store.transition(request.id, {
      from: ['queued'],
      to: 'sending',
      actor: 'cloudops',
    });
    if (!sending.ok) throw new Error(`request ${request.id} did not move to sending`);
    const ran = await store.transition(request.id, {
      from: ['sending'],
      to: 'succeeded',
      actor: 'cloudops',
      patch: { nextStep: 1, ...patch },
    });
    if (!ran.ok) throw new Error(`request ${request.id} did not move to succeeded`);
    return ran.request;
  }
  const job = (requestId: string, event: ReplyEvent, step?: number) =>
    queues.notify.getJob(replyId({ requestId, event, step }));

  it('an offer noted before the stop is announced when the item is taken again; the reminder is due a day after the offer', async () => {
    const request = await leased();
    await due.set(leaseItem(request.id), clock);
    const offeredAt = clock.toISOString();
    await schedulerOf(stopping()).stop();
    expect((await store.get(request.id))?.lease?.offeredAt).toBe(offeredAt);
    expect(await job(request.id, 'lease_offer')).toBeUndefined();

    clock = new Date(clock.getTime() + 61_000);
    await schedulerOf(lifecycle).stop();
    expect(await job(request.id, 'lease_offer')).toBeDefined();
    expect((await due.earliest())?.toISOString()).toBe(new Date(Date.parse(offeredAt) + DAY).toISOString());
    const audit = await new AuditLog(redis, prefix).read({ requestId: request.id });
    expect(audit.filter((e) => e.state === 'lease').map((e) => e.detail)).toEqual(['return offered']);
  });

  it('an offer announced before a stop that came ahead of its next due time is not announced twice', async () => {
    const request = await leased();
    await due.set(leaseItem(request.id), clock);
    const offeredAt = clock.toISOString();
    // This process notes and announces, then stops before it moves the due item on.
    const stopsAtDue = new RequestLifecycle({
      ...lifecycleDeps,
      outbox: {
        ...lifecycleDeps.outbox,
        dueAt: async () => {
          throw new Error('the process stopped here');
        },
      },
    });
    await schedulerOf(stopsAtDue).stop();
    expect(await job(request.id, 'lease_offer')).toBeDefined();
    clock = new Date(clock.getTime() + 61_000);
    await schedulerOf(lifecycle).stop();
    const offers = (await queues.notify.getJobs(['waiting', 'delayed', 'active', 'completed'])).filter(
      (j) => j.id === replyId({ requestId: request.id, event: 'lease_offer' }),
    );
    expect(offers).toHaveLength(1);
    expect((await due.earliest())?.toISOString()).toBe(new Date(Date.parse(offeredAt) + DAY).toISOString());
  });

  it('a reminder noted before the stop is announced when the item is taken again', async () => {
    const offeredAt = new Date(clock.getTime() - DAY - HOUR).toISOString();
    const request = await leased({ offeredAt });
    await due.set(leaseItem(request.id), clock);
    await schedulerOf(stopping()).stop();
    expect((await store.get(request.id))?.lease?.reminders).toBe(1);
    expect(await job(request.id, 'lease_reminder', 1)).toBeUndefined();

    clock = new Date(clock.getTime() + 61_000);
    const remindedAt = (await store.get(request.id))?.lease?.remindedAt ?? '';
    await schedulerOf(lifecycle).stop();
    expect(await job(request.id, 'lease_reminder', 1)).toBeDefined();
    expect((await due.earliest())?.toISOString()).toBe(new Date(Date.parse(remindedAt) + DAY).toISOString());
    const audit = await new AuditLog(redis, prefix).read({ requestId: request.id });
    expect(audit.filter((e) => e.state === 'lease').map((e) => e.detail)).toEqual(['reminder 1']);
  });

  it('"Keep it" noted before the stop is announced within a minute, by the lease’s due item', async () => {
    const request = await leased({ offeredAt: new Date(clock.getTime() - HOUR).toISOString() });
    await due.set(leaseItem(request.id), new Date(clock.getTime() + DAY - HOUR));
    await expect(stopping().leases.keep(request, 'U0DEV', 'still busy')).rejects.toThrow('stopped here');
    expect((await store.get(request.id))?.lease?.kept?.reason).toBe('still busy');
    expect(await job(request.id, 'lease_kept')).toBeUndefined();

    clock = new Date(clock.getTime() + 61_000);
    await schedulerOf(lifecycle).stop();
    expect(await job(request.id, 'lease_kept')).toBeDefined();
    expect(await due.earliest()).toBeUndefined();
  });

  it('"Back to … The lease is closed." is announced when the return is run again after a stop', async () => {
    const lease = await leased({ offeredAt: new Date(clock.getTime() - HOUR).toISOString() });
    await due.set(leaseItem(lease.id), new Date(clock.getTime() + DAY - HOUR));
    const input = resizeRequest({ state: 'queued', target: { cores: 2 } });
    if (input.params.kind === 'resize') input.params = { ...input.params, returnOf: lease.id };
    const back = await succeeded(await store.create(input, 'U0DEV'));
    const ending = (announce: LeaseEnding['announce']): LeaseEnding => ({
      store,
      dropDue: (items) => due.drop(items),
      announce,
    });
    await expect(
      endReturnedLease(
        ending(async () => {
          throw new Error('the process stopped here');
        }),
        back,
        clock,
      ),
    ).rejects.toThrow('stopped here');
    expect((await store.get(lease.id))?.leaseOpen).toBe(false);
    // The worker's job runs again (its request succeeded): the lease is closed, and its end is announced now.
    await endReturnedLease(
      ending((r, e) => lifecycleDeps.outbox.announce(r, e)),
      back,
      clock,
    );
    expect(await job(lease.id, 'lease_returned')).toBeDefined();
    expect(await due.earliest()).toBeUndefined();
  });
});
