import { Worker } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { enqueueExecution, QUEUE_NAMES } from '../../src/jobs/queues.ts';
import { FAST_SWEEP_POLICY, sweepStranded } from '../../src/jobs/stranded-sweeper.ts';
import { AuditLog } from '../../src/requests/audit/audit.ts';
import type { CloudRequest, NewRequest } from '../../src/requests/model/types.ts';
import { PROJECT } from '../fixtures/requests.ts';
import { approveSealed } from '../helpers/seal.ts';
import { type JobsEnv, resizeOf, startJobsEnv } from './jobs-env.ts';

// A failure between two writes (state stored, job not added) must not strand a request: the sweeper finds it.
let env: JobsEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

/** Stores a request and moves it through `states`, as the Slack handlers would, without adding any job. */
async function storeIn(current: JobsEnv, request: NewRequest, states: ('approved' | 'queued')[]) {
  let stored: CloudRequest = await current.store.create(request, request.requester);
  let from: CloudRequest['state'] = 'pending';
  // The approval as the web role counts it: sealed, or the worker would refuse to run it.
  if (states[0] === 'approved') {
    stored = await approveSealed(current.store, stored, 'U0LEAD', { queue: false });
    from = 'approved';
  }
  for (const to of states.slice(from === 'approved' ? 1 : 0)) {
    const moved = await current.store.transition(stored.id, { from: [from], to, actor: 'U0LEAD' });
    if (!moved.ok) throw new Error(`could not move ${stored.id} to ${to}`);
    stored = moved.request;
    from = to;
  }
  return stored;
}

const sweepDeps = (current: JobsEnv) => ({
  store: current.store,
  queues: current.queues,
  now: () => new Date(),
  logger: current.deps.logger,
});

describe('requests stranded between two writes', () => {
  it('the awaiting-run index follows the state: in while approved or queued, out once sending or final', async () => {
    env = await startJobsEnv({ name: 'stranded-index' });
    const later = new Date(Date.now() + 60_000);
    const pending = await storeIn(env, resizeOf(env, 101, { cores: 6 }), []);
    expect(await env.store.awaitingRun(later)).not.toContain(pending.id);
    const approved = await storeIn(env, resizeOf(env, 101, { cores: 6 }), ['approved']);
    const queued = await storeIn(env, resizeOf(env, 102, { cores: 6 }), ['approved', 'queued']);
    expect(await env.store.awaitingRun(later)).toEqual(expect.arrayContaining([approved.id, queued.id]));

    await env.store.transition(queued.id, { from: ['queued'], to: 'sending', actor: 'cloudops' });
    await env.store.transition(approved.id, { from: ['approved'], to: 'queued', actor: 'cloudops' });
    const ids = await env.store.awaitingRun(later);
    expect(ids).toContain(approved.id);
    expect(ids).not.toContain(queued.id);
    // Entries younger than the cut-off are left to the handler that is about to enqueue them.
    expect(await env.store.awaitingRun(new Date(Date.now() - 60_000))).toEqual([]);
  });

  it('approved-never-queued and queued-without-a-job run once the sweeper hands them back; live jobs are left alone', async () => {
    env = await startJobsEnv({ name: 'stranded-sweep' });
    const current = env;
    const approvedOnly = await storeIn(current, resizeOf(current, 101, { cores: 6 }), ['approved']);
    const queuedNoJob = await storeIn(current, resizeOf(current, 102, { cores: 6 }), ['approved', 'queued']);
    // A scheduled run: queued with a delayed job an hour away, which the sweeper must not touch.
    const scheduled = await storeIn(
      current,
      { ...resizeOf(current, 103, { cores: 6 }), runAt: new Date(Date.now() + 3_600_000).toISOString() },
      ['approved', 'queued'],
    );
    await enqueueExecution(current.queues, scheduled, new Date());

    const first = await sweepStranded(sweepDeps(current), FAST_SWEEP_POLICY);
    expect(first.queued).toEqual([approvedOnly.id]);
    expect(first.enqueued.sort()).toEqual([approvedOnly.id, queuedNoJob.id].sort());
    expect(await (await current.queues.execute.getJob(scheduled.id))?.getState()).toBe('delayed');

    // A second sweep finds nothing to do: every queued request has a live job.
    const second = await sweepStranded(sweepDeps(current), FAST_SWEEP_POLICY);
    expect(second.queued).toEqual([]);
    expect(second.enqueued).toEqual([]);

    current.startWorkers();
    for (const request of [approvedOnly, queuedNoJob]) {
      expect((await current.waitForState(request.id, ['succeeded', 'refused', 'unknown'])).state).toBe(
        'succeeded',
      );
    }
    // Each ran exactly once against the API; the scheduled one has not run.
    const resizes = current.sim.calls.filter((c) => c.route === 'resize');
    expect(resizes.map((c) => c.path).sort()).toEqual(
      [101, 102].map((vmid) => `/cloud/project/${PROJECT.uuid}/vm/${vmid}/upgrade/`).sort(),
    );
    const audit = await new AuditLog(current.redis, current.prefix).read({ requestId: approvedOnly.id });
    expect(audit.map((e) => e.state)).toEqual([
      'created',
      'pending',
      'approved',
      'queued',
      'sending',
      'succeeded',
    ]);
    expect(audit.find((e) => e.state === 'queued')?.detail).toMatch(/queued by the sweeper/);
  });

  it('a queued request whose job finished without running it is enqueued again and runs once', async () => {
    env = await startJobsEnv({ name: 'stranded-finished' });
    const current = env;
    const request = await storeIn(current, resizeOf(current, 101, { cores: 6 }), ['approved', 'queued']);
    await enqueueExecution(current.queues, request, new Date());
    // A stray worker (an old version, a bug) completes the job without doing anything.
    const stray = new Worker(QUEUE_NAMES.execute, async () => 'ignored', {
      connection: current.redis.duplicate({ maxRetriesPerRequest: null }),
      prefix: current.prefix,
    });
    await until(
      async () => (await (await current.queues.execute.getJob(request.id))?.getState()) === 'completed',
    );
    await stray.close();
    await stray.disconnect();
    expect((await current.store.get(request.id))?.state).toBe('queued');

    const result = await sweepStranded(sweepDeps(current), FAST_SWEEP_POLICY);
    expect(result.enqueued).toEqual([request.id]);
    current.startWorkers();
    expect((await current.waitForState(request.id, ['succeeded', 'refused', 'unknown'])).state).toBe(
      'succeeded',
    );
    expect(current.sim.calls.filter((c) => c.route === 'resize')).toHaveLength(1);
  });
});

async function until(predicate: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
