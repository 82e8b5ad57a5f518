import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { PriceSource } from '../../src/cloud/price-cache.ts';
import { type Policy, type ProjectPolicy, parsePolicy } from '../../src/config/policy.ts';
import { dueKey } from '../../src/jobs/due-times.ts';
import { createOutbox } from '../../src/jobs/outbox.ts';
import { createQueues, type Queues } from '../../src/jobs/queues.ts';
import { QUEUE_REDIS_OPTIONS } from '../../src/jobs/redis-options.ts';
import { createMetrics } from '../../src/observability/metrics.ts';
import { createApprovalPolicy } from '../../src/requests/approval/approvers.ts';
import { AuditLog, exportAudit } from '../../src/requests/audit/audit.ts';
import { RequestLifecycle } from '../../src/requests/lifecycle/request-lifecycle.ts';
import type { Decision } from '../../src/requests/model/decision.ts';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { RequestStore } from '../../src/requests/store/store.ts';
import { knownVm, VmFactsStore } from '../../src/requests/vm-facts.ts';
import { checkResize } from '../../src/rules/resize.ts';
import type { ResizeTarget } from '../../src/rules/types.ts';
import { deleteKeys, testRedis, testRedisUrl, uniquePrefix } from '../helpers/redis.ts';

/**
 * The lifecycle on real Redis and real BullMQ queues, without Bolt: every transition a surface can ask for, and the
 * races between people deciding at once, each ending in exactly one execute job.
 */
const POLICY = `
approvers: [U0LEAD, U0LEAD2, U0LEAD3]
approval_ttl_hours: 24
projects:
  - name: shop-prod
    uuid: 0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10
    channels: [C0PROD]
    vms:
      - { vmid: 101, name: web-1, cores: 2, ram_gb: 4, os_disk_gb: 50, cpu_class: regular, wan_mode: ipv4 }
  - name: shop-staging
    uuid: 7c9e6679-7425-40de-944b-e07fc1f90ae7
    channels: [C0STAGING]
    approval: { resize_up: none, resize_down: none, restore: none }
    vms:
      - { vmid: 201, cores: 1, ram_gb: 2, os_disk_gb: 20, cpu_class: light, wan_mode: ipv6 }
`;
const noPrices: PriceSource = {
  clusterPrices: async () => undefined,
  clusters: async () => [],
};

let redis: Redis;
let prefix: string;
let clock: Date;
let policy: Policy;
let store: RequestStore;
let queues: Queues;
const extra: { redis: Redis; queues: Queues }[] = [];

/** One bot process's lifecycle: its own Redis connection and queues, as a second web instance would have. */
function lifecycle(
  connection = redis,
  q = queues,
  now = () => clock,
  store = new RequestStore(connection, { prefix, now }),
): RequestLifecycle {
  return new RequestLifecycle({
    policy,
    store,
    outbox: createOutbox(q, now),
    approvals: createApprovalPolicy(policy),
    prices: noPrices,
    now,
    logger: pino({ level: 'silent' }),
    metrics: createMetrics({ defaultMetrics: false }),
    vmFacts: new VmFactsStore(connection, { prefix }),
  });
}

/** N lifecycles on N connections, so their calls really interleave on the server. */
function instances(n: number, now?: () => Date): RequestLifecycle[] {
  return Array.from({ length: n }, () => {
    const connection = testRedis();
    const q = createQueues(connection, prefix);
    extra.push({ redis: connection, queues: q });
    return lifecycle(connection, q, now);
  });
}

const project = (name: string): ProjectPolicy => {
  const found = policy.projects.find((p) => p.name === name);
  if (!found) throw new Error(name);
  return found;
};

async function newResize(
  target: ResizeTarget = { cores: 4 },
  projectName = 'shop-prod',
  requests = lifecycle(),
): Promise<CloudRequest> {
  const p = project(projectName);
  const vmid = p.vms[0]?.vmid ?? 0;
  const vm = knownVm(p.vms[0], undefined, vmid);
  const check = checkResize({
    vm,
    target,
    limits: { cores: 32, ramGb: 256, osDiskGb: 2000 },
    configured: { cpuClass: false, privateNetwork: false },
    confirmedStopped: true,
    acceptWanTwoStep: false,
    now: clock,
  });
  expect(check.violations).toEqual([]);
  return requests.createResize(
    { user: 'U0DEV', teamId: 'T0001', channel: p.channels[0] ?? '' },
    { project: p, vm, target, check, confirmedStopped: true },
  );
}

const executeJobs = async () => (await queues.execute.getJobs(['waiting', 'delayed', 'active'])).length;
const notifyJobs = async (type: string) =>
  (await queues.notify.getJobs(['waiting', 'delayed'])).filter((j) => j.name === type);
const refusalOf = (decision: Decision) => (decision.ok ? undefined : decision.refusal.code);

beforeAll(() => {
  redis = testRedis();
});
afterAll(async () => {
  await redis.quit();
});
beforeEach(() => {
  prefix = uniquePrefix('lifecycle');
  clock = new Date('2026-03-02T10:00:00Z');
  policy = parsePolicy(POLICY);
  store = new RequestStore(redis, { prefix, now: () => clock });
  queues = createQueues(redis, prefix);
});
afterEach(async () => {
  for (const { redis: r, queues: q } of extra.splice(0)) {
    await q.close();
    await r.quit();
  }
  await queues.close();
  await deleteKeys(redis, prefix);
});

describe('RequestLifecycle: every transition, without Slack', () => {
  it('creates a pending request with its approvers, posts it and schedules its expiry', async () => {
    const request = await newResize();
    expect(request).toMatchObject({
      state: 'pending',
      requester: 'U0DEV',
      approvers: ['U0LEAD', 'U0LEAD2', 'U0LEAD3'],
      expiresAt: '2026-03-03T10:00:00.000Z',
      needsApproval: true,
    });
    expect(await notifyJobs('post-request')).toHaveLength(1);
    const expire = await notifyJobs('expire');
    expect(expire).toHaveLength(1);
    expect(expire[0]?.opts.delay).toBe(24 * 3_600_000);
    expect(await executeJobs()).toBe(0);
  });

  it('queues at once when the project needs no approval', async () => {
    const request = await newResize({ cores: 2 }, 'shop-staging');
    expect(request.state).toBe('queued');
    expect(await queues.execute.getJob(request.id)).toBeDefined();
    expect(await notifyJobs('expire')).toHaveLength(0);
    const audit = await new AuditLog(redis, prefix).read({ requestId: request.id });
    expect(audit.map((e) => e.state)).toEqual(['created', 'pending', 'queued']);
  });

  it('approve: never the requester, only an approver; queues one job, announces, drops the expiry', async () => {
    const request = await newResize();
    const requests = lifecycle();
    expect(refusalOf(await requests.approve(request, 'U0DEV'))).toBe('own_request');
    const stranger = await requests.approve(request, 'U0NOBODY');
    expect(stranger).toEqual({
      ok: false,
      refusal: { code: 'not_approver', approvers: ['U0LEAD', 'U0LEAD2', 'U0LEAD3'] },
    });
    const approved = await requests.approve(request, 'U0LEAD');
    expect(approved.ok && approved.request).toMatchObject({ state: 'queued', approvedBy: 'U0LEAD' });
    expect(await queues.execute.getJob(request.id)).toBeDefined();
    expect(await notifyJobs('expire')).toHaveLength(0);
    expect((await notifyJobs('report')).map((j) => j.data.event)).toEqual(['approved']);
    // A late click on the request as it was read before finds it decided.
    const late = await requests.approve(request, 'U0LEAD2');
    expect(refusalOf(late)).toBe('already');
    expect(await executeJobs()).toBe(1);
    const audit = await new AuditLog(redis, prefix).read({ requestId: request.id });
    expect(audit.map((e) => [e.state, e.actor])).toEqual([
      ['created', 'U0DEV'],
      ['pending', 'U0DEV'],
      ['approved', 'U0LEAD'],
      ['queued', 'cloudops'],
    ]);
  });

  it('reject: an approver with a reason; the requester is refused; nothing is queued', async () => {
    const request = await newResize();
    const requests = lifecycle();
    expect(refusalOf(await requests.mayReject(request, 'U0DEV'))).toBe('own_request');
    expect((await requests.mayReject(request, 'U0LEAD2')).ok).toBe(true);
    const rejected = await requests.reject(request, 'U0LEAD2', 'not during the sale');
    expect(rejected.ok && rejected.request).toMatchObject({
      state: 'rejected',
      rejectedBy: 'U0LEAD2',
      rejectReason: 'not during the sale',
    });
    expect(await executeJobs()).toBe(0);
    expect(await notifyJobs('expire')).toHaveLength(0);
  });

  it('cancel: the requester while pending; an approver only for a scheduled run that has not started', async () => {
    const pending = await newResize();
    const requests = lifecycle();
    expect(refusalOf(await requests.cancel(pending, 'U0LEAD'))).toBe('not_requester');
    expect((await requests.cancel(pending, 'U0DEV')).ok).toBe(true);

    const p = project('shop-prod');
    const vm = knownVm(p.vms[0], undefined, 101);
    const runAt = new Date(clock.getTime() + 3_600_000);
    const target = { cores: 1 };
    const check = checkResize({
      vm,
      target,
      limits: { cores: 32, ramGb: 256, osDiskGb: 2000 },
      configured: { cpuClass: false, privateNetwork: false },
      confirmedStopped: true,
      acceptWanTwoStep: false,
      now: runAt,
    });
    const scheduled = await requests.createResize(
      { user: 'U0DEV', teamId: 'T0001', channel: 'C0PROD' },
      { project: p, vm, target, check, confirmedStopped: true, runAt },
    );
    const approved = await requests.approve(scheduled, 'U0LEAD');
    if (!approved.ok) throw new Error('not approved');
    expect((await queues.execute.getJob(scheduled.id))?.opts.delay).toBe(3_600_000);
    const cancelled = await requests.cancel(approved.request, 'U0LEAD2');
    expect(cancelled.ok && cancelled.request.state).toBe('cancelled');
    expect(await queues.execute.getJob(scheduled.id)).toBeUndefined();
  });

  it('resolve: only from unknown, by the requester or an approver', async () => {
    const request = await newResize();
    const requests = lifecycle();
    expect(refusalOf(await requests.resolve(request, 'U0DEV', 'resolved_done'))).toBe('already');
    await requests.approve(request, 'U0LEAD');
    await store.transition(request.id, { from: ['queued'], to: 'sending', actor: 'cloudops' });
    const unknown = await store.transition(request.id, {
      from: ['sending'],
      to: 'unknown',
      actor: 'cloudops',
    });
    if (!unknown.ok) throw new Error('not unknown');
    expect(refusalOf(await requests.resolve(unknown.request, 'U0NOBODY', 'resolved_done'))).toBe(
      'not_involved',
    );
    const resolved = await requests.resolve(unknown.request, 'U0LEAD3', 'resolved_failed');
    expect(resolved.ok && resolved.request).toMatchObject({
      state: 'resolved_failed',
      resolvedBy: 'U0LEAD3',
    });
  });

  it('a decision on a request past its expiry expires it instead, whoever clicks', async () => {
    const request = await newResize();
    clock = new Date(clock.getTime() + 24 * 3_600_000 + 1);
    const decision = await lifecycle().approve(request, 'U0LEAD');
    expect(refusalOf(decision)).toBe('expired');
    expect((await store.get(request.id))?.state).toBe('expired');
    expect(await executeJobs()).toBe(0);
    expect((await notifyJobs('report')).map((j) => j.data.event)).toEqual(['expired']);
  });
});

/** Counts what `connection` sends: commands, and socket writes (each write is one round trip, however many it holds). */
async function counted(
  connection: Redis,
): Promise<{ commands: string[]; queuesNamed: string[]; args: string[]; writes: () => number }> {
  await connection.ping();
  const commands: string[] = [];
  // Each command's arguments as one text, in the order sent.
  const sentArgs: string[] = [];
  // For each command, in the order sent: the bot's queue its keys name ('' for none).
  const queuesNamed: string[] = [];
  let writes = 0;
  const send = connection.sendCommand.bind(connection);
  connection.sendCommand = (...args: Parameters<Redis['sendCommand']>) => {
    commands.push(args[0].name);
    const keys = args[0].args.map(String).join(' ');
    sentArgs.push(keys);
    queuesNamed.push(/:(execute|notify|due)\b/.exec(keys)?.[1] ?? '');
    return send(...args);
  };
  const stream = connection.stream;
  const write = stream.write.bind(stream) as (...a: unknown[]) => boolean;
  stream.write = ((...a: unknown[]) => {
    writes++;
    return write(...a);
  }) as typeof stream.write;
  return { commands, queuesNamed, args: sentArgs, writes: () => writes };
}

describe('RequestLifecycle: round trips of an approval', () => {
  it('an approval reads the VM’s facts for its re-check, then is one compare-and-set that approves and queues, then one batch for its announcement and the job: 3 round trips', async () => {
    const request = await newResize();
    // As the bot runs: the store on a plain connection, the queues on the auto-pipelined one.
    const storeRedis = testRedis();
    const queueRedis = new Redis(testRedisUrl(), QUEUE_REDIS_OPTIONS);
    const q = createQueues(queueRedis, prefix);
    extra.push({ redis: storeRedis, queues: q }, { redis: queueRedis, queues: q });
    // BullMQ loads its scripts on first use: a warm-up job, removed again, keeps that out of the count.
    await q.notify.add('warm-up', {}, { jobId: 'warm-up' });
    await q.execute.add('warm-up', {}, { jobId: 'warm-up' });
    await Promise.all([q.notify.remove('warm-up'), q.execute.remove('warm-up'), q.due.drop([])]);
    // A store reads the audit chain's head at its first write, then knows it: as in the running bot, it has written.
    const store = new RequestStore(storeRedis, { prefix, now: () => clock });
    await store.record(request, { state: 'reminder', actor: 'cloudops' });
    const life = lifecycle(storeRedis, q, () => clock, store);
    const onStore = await counted(storeRedis);
    const onQueues = await counted(queueRedis);
    const approved = await life.approve(request, 'U0LEAD');
    expect(approved.ok && approved.request.state).toBe('queued');
    // Before: get + compare-and-set twice, and four announcement writes one after another, then the job: 9; then
    // the two compare-and-sets and the job after the announcement: 4.
    // The VM's facts are read first: the request is checked again against them before the approval counts.
    expect(onStore.commands).toEqual(['hgetall', 'evalsha']);
    expect(onQueues.commands).toHaveLength(4);
    expect(onStore.writes() + onQueues.writes()).toBe(3);
    // In that batch the announcement goes before the job, so Redis stores it first.
    expect(onQueues.queuesNamed.at(-1)).toBe('execute');
    expect(onQueues.queuesNamed.slice(0, -1)).not.toContain('execute');
    // One decision, both entries, in order: approved by the approver, queued by the bot.
    const entries: { state?: string; actor?: string }[] = [];
    for await (const entry of exportAudit(storeRedis, prefix))
      if (entry.requestId === request.id) entries.push(entry);
    expect(entries.map((e) => [e.state, e.actor]).slice(-2)).toEqual([
      ['approved', 'U0LEAD'],
      ['queued', 'cloudops'],
    ]);
    expect(await notifyJobs('expire')).toHaveLength(0);
    expect((await notifyJobs('report')).map((j) => j.data.event)).toEqual(['approved']);
    expect(await executeJobs()).toBe(1);
  });
});

describe('RequestLifecycle: round trips of a new request', () => {
  it('its expiry, reminder and escalation leave in the same write as its message, the message last: 1 round trip after the store', async () => {
    policy = parsePolicy(`${POLICY}approvals:\n  remind_after_hours: 2\n  escalate_to: [U0BOSS]\n`);
    // As the bot runs: the store on a plain connection, the queues on the auto-pipelined one.
    const storeRedis = testRedis();
    const queueRedis = new Redis(testRedisUrl(), QUEUE_REDIS_OPTIONS);
    const q = createQueues(queueRedis, prefix);
    extra.push({ redis: storeRedis, queues: q }, { redis: queueRedis, queues: q });
    await q.notify.add('warm-up', {}, { jobId: 'warm-up' });
    await Promise.all([q.notify.remove('warm-up'), q.due.drop([])]);
    const onQueues = await counted(queueRedis);
    const created = await newResize({ cores: 4 }, 'shop-prod', lifecycle(storeRedis, q));
    expect(created.state).toBe('pending');
    // Before: the post, then the expiry, the reminder and the escalation, each awaited: 4 writes. A process that died
    // after the post left a request whose buttons never expired and nobody was reminded of.
    expect(onQueues.writes()).toBe(1);
    expect(onQueues.commands).toHaveLength(4);
    // The message last: Redis stores its expiry and due times first, so no message is ever posted without them.
    expect(onQueues.args.at(-1)).toContain('post-request');
    expect(onQueues.args.slice(0, -1).join(' ')).not.toContain('post-request');
    expect((await notifyJobs('post-request')).map((j) => j.data.requestId)).toEqual([created.id]);
    expect((await notifyJobs('expire')).map((j) => j.data.requestId)).toEqual([created.id]);
    const due = await queueRedis.zrange(dueKey(prefix), 0, -1);
    expect(due.sort()).toEqual([`escalate:${created.id}`, `remind:${created.id}`]);
  });
});

describe('RequestLifecycle: races end in exactly one job', () => {
  it('20 approvers clicking at once on 20 connections: one approval, one execute job, one reply', async () => {
    const request = await newResize();
    policy.approvers.push(...Array.from({ length: 17 }, (_, i) => `U0EXTRA${i}`));
    const everyone = [...request.approvers];
    const many = instances(everyone.length);
    // The request as every clicker read it before clicking.
    const open = { ...request, approvers: everyone };
    const decisions = await Promise.all(many.map((l, i) => l.approve(open, everyone[i] ?? '')));
    expect(decisions.filter((d) => d.ok)).toHaveLength(1);
    expect(decisions.filter((d) => !d.ok).map(refusalOf)).toEqual(Array(everyone.length - 1).fill('already'));
    expect(await executeJobs()).toBe(1);
    expect((await notifyJobs('report')).filter((j) => j.data.event === 'approved')).toHaveLength(1);
  });

  it('approve against cancel: one of them wins, and a job exists only if the approval won', async () => {
    for (let round = 0; round < 10; round++) {
      const request = await newResize();
      const [a, b] = instances(2);
      const [approved, cancelled] = await Promise.all([
        a?.approve(request, 'U0LEAD'),
        b?.cancel(request, 'U0DEV'),
      ]);
      expect([approved?.ok, cancelled?.ok].filter(Boolean)).toHaveLength(1);
      const final = await store.get(request.id);
      const job = await queues.execute.getJob(request.id);
      if (approved?.ok) {
        expect(final?.state).toBe('queued');
        expect(job).toBeDefined();
      } else {
        expect(final?.state).toBe('cancelled');
        expect(job).toBeUndefined();
      }
    }
  });

  it('approve against the expire job at the expiry instant: approved or expired, never both, one job at most', async () => {
    const outcomes = new Set<string>();
    for (let round = 0; round < 12; round++) {
      const request = await newResize();
      const expiresAt = new Date(request.expiresAt).getTime();
      // The approver's clock is a millisecond before the expiry, the expire job's a millisecond after it.
      const [approver] = instances(1, () => new Date(expiresAt - 1));
      const [expirer] = instances(1, () => new Date(expiresAt + 1));
      const [approved, expired] = await Promise.all([
        approver?.approve(request, 'U0LEAD'),
        expirer?.expireIfDue(request, 'no decision before it expired'),
      ]);
      const final = (await store.get(request.id))?.state;
      const job = await queues.execute.getJob(request.id);
      const replies = (await notifyJobs('report')).filter((j) => j.data.requestId === request.id);
      if (approved?.ok) {
        expect(final).toBe('queued');
        expect(job).toBeDefined();
        expect(replies.map((j) => j.data.event)).toEqual(['approved']);
      } else {
        expect(expired).toBe(true);
        expect(final).toBe('expired');
        expect(job).toBeUndefined();
        expect(replies.map((j) => j.data.event)).toEqual(['expired']);
      }
      outcomes.add(final ?? 'missing');
    }
    expect([...outcomes].every((o) => o === 'queued' || o === 'expired')).toBe(true);
  });
});
