import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { type LocalRedis, startLocalRedis } from '../../sim/local-redis.ts';
import { FAST_TIMEOUTS } from '../../src/cloud/client.ts';
import { enqueueExecution, enqueueNotify, replyId } from '../../src/jobs/queues.ts';
import { QUEUE_REDIS_OPTIONS } from '../../src/jobs/redis-options.ts';
import { NotReplicatedError, ReplicaAck } from '../../src/jobs/replica-ack.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { AuditLog } from '../../src/requests/audit/audit.ts';
import { PROJECT } from '../fixtures/requests.ts';
import { startSlowTcpProxy } from '../helpers/proxies.ts';
import { approveSealed } from '../helpers/seal.ts';
import { WAIT_MS } from '../helpers/startup.ts';
import {
  startWorkerProcess,
  type WorkerProcess,
  type WorkerProcessConfig,
} from '../helpers/worker-process.ts';
import { JOBS_POLICY_YAML, type JobsEnv, resizeOf, startJobsEnv, until, waitForReplies } from './jobs-env.ts';

let env: JobsEnv | undefined;
let child: WorkerProcess | undefined;
let ownRedis: LocalRedis | undefined;

afterEach(async () => {
  await child?.kill();
  if (env) expect(env.slack.problems).toEqual([]);
  await env?.close();
  await ownRedis?.stop();
  env = undefined;
  child = undefined;
  ownRedis = undefined;
});

/** A worker process on the same Redis prefix, simulator and Slack stand-in as the test's env. */
function childConfig(current: JobsEnv): WorkerProcessConfig {
  return {
    redisUrl: current.redisUrl,
    prefix: current.prefix,
    cloudUrl: current.sim.url,
    cloudApiKey: current.sim.apiKey,
    slackApiUrl: current.slack.apiUrl,
    slackToken: current.slack.botToken,
    policyYaml: JOBS_POLICY_YAML,
  };
}

const FINAL = ['succeeded', 'refused', 'unknown'] as const;
/** Long enough for the calls of two VMs to overlap. */
const SLOW_CALL_MS = 600;

describe('one mutation per VM at a time', () => {
  it('serialises two requests for one VM while two VMs run in parallel', async () => {
    // The injected latency must stay well under the header timeout even on a loaded machine: a late answer is
    // rightly a timeout ("outcome unknown"), which is not what this test is about.
    env = await startJobsEnv({
      name: 'jobs-serial',
      cloudTimeouts: { ...FAST_TIMEOUTS, headersMs: SLOW_CALL_MS * 8, bodyMs: SLOW_CALL_MS * 8 },
    });
    env.sim.fault('resize', { kind: 'latency', ms: SLOW_CALL_MS, times: 4 });
    env.startWorkers();
    const a1 = await env.queueRequest(resizeOf(env, 102, { cores: 6 }));
    const a2 = await env.queueRequest(resizeOf(env, 102, { ramGb: 16 }));
    const b = await env.queueRequest(resizeOf(env, 101, { osDiskGb: 80 }));
    for (const r of [a1, a2, b]) {
      const done = await env.waitForState(r.id, [...FINAL]);
      // The outcome's reason says why a request did not succeed.
      expect(done.state, JSON.stringify(done.outcomes)).toBe('succeeded');
    }

    expect(env.sim.overlaps).toBe(0);
    const calls = env.sim.calls.filter((c) => c.route === 'resize');
    expect(calls).toHaveLength(3);
    const on = (vmid: number) => calls.filter((c) => c.path.includes(`/vm/${vmid}/`));
    const [first, second] = on(102);
    // Same VM: the second call starts only after the first ended.
    expect(second?.startMs ?? 0).toBeGreaterThanOrEqual(first?.endMs ?? Number.POSITIVE_INFINITY);
    // Different VMs: VM 101's call overlapped one of VM 102's.
    const other = on(101)[0];
    const overlapped = on(102).some(
      (c) => (other?.startMs ?? 0) < (c.endMs ?? 0) && (c.startMs ?? 0) < (other?.endMs ?? 0),
    );
    expect(overlapped).toBe(true);
  });
});

describe('the execute worker obeys a lost VM lock', () => {
  // A plain run's lock, move to sending and first marker are one script: a takeover can only land before it (the request
  // stays queued). The window between the lock and a marker remains for a later step (a two-step plan's second).
  it.each([
    { name: 'the first step of a plain run', steps: undefined, step: 0, waiting: 'queued', sentBefore: 0 },
    {
      name: "a two-step plan's second step",
      steps: [{ wanMode: 'off' as const }, { wanMode: 'ipv6' as const }],
      step: 1,
      waiting: 'sending',
      sentBefore: 1,
    },
  ])(
    'the lock taken over by another holder just before $name is marked: no step is sent until it is ours again, then once',
    async ({ steps, step, waiting, sentBefore }) => {
      env = await startJobsEnv({ name: 'jobs-lock-lost' });
      const current = env;
      const request = await current.queueRequest(
        steps ? resizeOf(current, 102, { wanMode: 'ipv6' }, { steps }) : resizeOf(current, 102, { cores: 6 }),
      );
      const lockKey = `${current.prefix}:vmlock:${PROJECT.uuid}:102`;
      const markerKey = `${current.prefix}:sending:${request.id}:${step}`;
      // The worker's Redis goes through a proxy: when the script that marks the step as sending is on its way, another
      // holder takes the lock first (as after a pause longer than the lock's lifetime).
      let takenOver = false;
      const proxy = await startSlowTcpProxy(current.redisUrl, 0, {
        beforeForward: async (chunk) => {
          if (takenOver || !chunk.includes(markerKey)) return;
          await current.redis.set(lockKey, 'another-worker', 'PX', 60_000);
          takenOver = true;
        },
      });
      const workerRedis = new Redis(proxy.url, QUEUE_REDIS_OPTIONS);
      workerRedis.on('error', () => undefined);
      try {
        current.startWorkers({ connection: workerRedis });
        await until(() => takenOver, 'the lock taken over before the send');
        // Long enough for many attempts (each waits 100 ms, then polls the lock 200 ms).
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        expect(current.sim.calls.filter((c) => c.route === 'resize')).toHaveLength(sentBefore);
        expect((await current.store.get(request.id))?.state).toBe(waiting);
        expect(await current.redis.exists(markerKey)).toBe(0);
        expect(await current.redis.get(lockKey)).toBe('another-worker');

        // The other holder lets go: the step is sent, once.
        await current.redis.del(lockKey);
        const done = await current.waitForState(request.id, [...FINAL]);
        expect(done.state).toBe('succeeded');
        expect(current.sim.calls.filter((c) => c.route === 'resize')).toHaveLength(sentBefore + 1);
      } finally {
        await current.close();
        env = undefined;
        await workerRedis.quit().catch(() => workerRedis.disconnect());
        await proxy.close();
      }
    },
  );
});

describe('a worker killed mid-call', () => {
  it('SIGKILL during the POST: a new worker does not send again, the request becomes unknown', async () => {
    env = await startJobsEnv({ name: 'jobs-kill' });
    const current = env;
    current.sim.fault('resize', { kind: 'latency', ms: 3_000 });
    child = await startWorkerProcess({ ...childConfig(current), cloudHeadersTimeoutMs: 20_000 });
    const request = await current.queueRequest(resizeOf(current, 102, { cores: 6 }));
    // Wait until the child's POST is in flight, then kill it as a crash would.
    await until(() => current.sim.calls.some((c) => c.route === 'resize'), 'the POST in flight');
    expect(current.sim.calls.filter((c) => c.route === 'resize')).toHaveLength(1);
    expect((await current.store.get(request.id))?.state).toBe('sending');
    expect(await child.kill('SIGKILL')).toBeNull();

    current.startWorkers();
    const done = await current.waitForState(request.id, [...FINAL], 30_000);
    expect(done.state).toBe('unknown');
    expect(done.outcomes[0]?.reason).toMatch(/worker stopped while this call was in flight/);
    const replies = await waitForReplies(current, request.id, 1);
    expect(replies[0]).toMatch(/^:warning: Outcome unknown/);
    await new Promise((r) => setTimeout(r, 3_000));
    expect(current.sim.calls.filter((c) => c.route === 'resize')).toHaveLength(1);
    const audit = await new AuditLog(current.redis, current.prefix).read({ requestId: request.id });
    expect(audit.map((e) => e.state)).toEqual([
      'created',
      'pending',
      'approved',
      'queued',
      'sending',
      'unknown',
    ]);
  });

  it('SIGTERM while a call runs: the call finishes, the request succeeds, the process exits 0', async () => {
    env = await startJobsEnv({ name: 'jobs-term' });
    const current = env;
    current.sim.fault('resize', { kind: 'latency', ms: 1_000 });
    child = await startWorkerProcess(childConfig(current));
    const request = await current.queueRequest(resizeOf(current, 102, { cores: 6 }));
    await until(() => current.sim.calls.some((c) => c.route === 'resize'), 'the POST in flight');
    expect(await child.kill('SIGTERM')).toBe(0);
    expect((await current.store.get(request.id))?.state).toBe('succeeded');
    expect(current.sim.applied).toHaveLength(1);
  });
});

describe('Redis outage', () => {
  it('Redis stopped and started again: queued requests still run, nothing is lost', async () => {
    ownRedis = await startLocalRedis({ appendOnly: true });
    env = await startJobsEnv({ name: 'jobs-redis', redisUrl: ownRedis.url });
    const first = await env.queueRequest(resizeOf(env, 102, { cores: 6 }));
    const second = await env.queueRequest(resizeOf(env, 101, { osDiskGb: 80 }));
    await ownRedis.stop({ keepDir: true });
    env.startWorkers();
    await new Promise((r) => setTimeout(r, 1_000));
    expect(env.sim.calls).toHaveLength(0);
    await ownRedis.restart();
    for (const r of [first, second]) {
      expect((await env.waitForState(r.id, [...FINAL], 30_000)).state).toBe('succeeded');
    }
    expect(env.sim.applied).toHaveLength(2);
    expect(await waitForReplies(env, first.id, 1, 30_000)).toHaveLength(1);
  });
});

describe('a worker killed after Slack accepted a thread reply, before it recorded it', () => {
  /**
   * Runs a resize in a child worker; Slack keeps the "Done" reply but answers late, and the child is killed in that
   * window. Then a worker in this process takes the stalled report over. Returns the request message's thread.
   */
  async function crashAfterReplyAccepted(current: JobsEnv, startWorkers: () => void) {
    child = await startWorkerProcess(childConfig(current));
    const request = await current.queueRequest(resizeOf(current, 102, { cores: 6 }));
    const posted = await current.slack.waitFor(() =>
      current.slack.messages('C0PROD').find((m) => !m.thread_ts && (m.text ?? '').includes(request.id)),
    );
    // The next chat.postMessage is the thread reply: Slack takes it, and its answer never reaches the child.
    current.slack.holdAnswer('chat.postMessage', 60_000);
    await current.waitForState(request.id, ['succeeded']);
    await until(() => current.slack.thread('C0PROD', posted.ts).length === 1, 'the reply accepted by Slack');
    expect(await child.kill('SIGKILL')).toBeNull();
    const recorded = `${current.prefix}:replied:${replyId({ requestId: request.id, event: 'succeeded' })}`;
    expect(await current.redis.exists(recorded)).toBe(0);

    startWorkers();
    const deadline = Date.now() + 30_000;
    while ((await current.redis.exists(recorded)) === 0) {
      if (Date.now() > deadline) throw new Error('the retried report never finished');
      await new Promise((r) => setTimeout(r, 50));
    }
    return current.slack.thread('C0PROD', posted.ts);
  }

  it('the retried report finds the reply by its metadata and posts nothing new', async () => {
    env = await startJobsEnv({ name: 'jobs-reply-crash' });
    const current = env;
    const thread = await crashAfterReplyAccepted(current, () => current.startWorkers());
    expect(thread.map((m) => m.text?.split(' ')[0])).toEqual([':white_check_mark:']);
    expect(thread[0]?.metadata).toMatchObject({ event_type: 'cloudops_reply' });
    expect(current.slack.callsOf('conversations.replies').length).toBeGreaterThanOrEqual(1);
    await new Promise((r) => setTimeout(r, 500));
    expect(current.slack.thread('C0PROD', thread[0]?.thread_ts ?? '')).toHaveLength(1);
    expect(current.sim.applied).toHaveLength(1);
  });

  it('without the history scope (missing_scope) the reply is posted again and the log says a reply may repeat', async () => {
    env = await startJobsEnv({ name: 'jobs-reply-scope' });
    const current = env;
    const logs: string[] = [];
    const logger = createLogger({ level: 'warn' }, { write: (line: string) => void logs.push(line) });
    current.slack.failNext('conversations.replies', { error: 'missing_scope' });
    const thread = await crashAfterReplyAccepted(current, () => current.startWorkers({ logger }));
    expect(thread).toHaveLength(2);
    expect(logs.join('')).toContain('a reply interrupted by a crash may repeat');
  });
});

describe('a failover that loses the success it was waiting for', () => {
  it('a request the new master has ended otherwise is not announced as succeeded', async () => {
    const jobs = await startJobsEnv({ name: 'jobs-settle' });
    env = jobs;
    const requestKey = (id: string) => `${jobs.prefix}:req:${id}`;
    /**
     * Sentinels as the worker sees them in a failover: the marker reaches a replica, the success does not. While
     * the worker waits, the master it wrote to is gone; the new one holds the request as it was before the success
     * (sending), and its recovery ends it as 'unknown', as the stranded sweeper would.
     */
    class FailoverAfterSuccess extends ReplicaAck {
      failed = false;
      override async confirm(): Promise<void> {
        // The test's one request (read here: the worker may take it before queueRequest returns its id).
        const [now] = await jobs.store.listByChannel('C0PROD', 1);
        if (this.failed || !now || now.state !== 'succeeded') return;
        this.failed = true;
        await jobs.redis.set(requestKey(now.id), JSON.stringify({ ...now, state: 'sending' }));
        const ended = await jobs.store.transition(now.id, {
          from: ['sending'],
          to: 'unknown',
          actor: 'cloudops',
          detail: 'ended by the new master',
        });
        expect(ended.ok).toBe(true);
        throw new NotReplicatedError('0 of 1 Redis replicas acknowledged the write within 1000 ms');
      }
    }
    const ack = new FailoverAfterSuccess(jobs.redis, () => 1);
    jobs.startWorkers({ replicaAck: ack });
    // The notify worker confirms its writes too: its post of the request message, running late beside the success,
    // could play the failover in the success's place (or between the success's two writes). The message is posted
    // first, its job ended, and only then is the request queued: the one confirm that sees 'succeeded' is the run's.
    const input = resizeOf(jobs, 102, { cores: 6 });
    const made = await jobs.store.create(input, input.requester);
    await enqueueNotify(jobs.queues, { type: 'post-request', requestId: made.id });
    const ended = async (queue: string) =>
      (await jobs.metrics.jobs.get()).values.find((v) => v.labels.queue === queue && v.value > 0)?.labels
        .outcome;
    await expect.poll(() => ended('notify'), { timeout: WAIT_MS }).toBeDefined();
    const posted = await jobs.store.get(made.id);
    expect(posted?.messageTs).toBeDefined();
    // Approved (sealed, as the web role does), which queues it.
    const request = await approveSealed(jobs.store, posted ?? made, 'U0LEAD');
    await enqueueExecution(jobs.queues, request, new Date());
    const outcome = () => ended('execute');
    // The job ends without announcing a success the store no longer holds.
    await expect.poll(outcome, { timeout: WAIT_MS }).toBeDefined();
    expect(ack.failed).toBe(true);
    expect(await outcome()).toBe('skipped');
    expect((await jobs.store.get(request.id))?.state).toBe('unknown');
  });
});
