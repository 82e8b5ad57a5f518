import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { enqueueNotify } from '../../src/jobs/queues.ts';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { type JobsEnv, resizeOf, startJobsEnv, threadTexts, waitForReplies } from './jobs-env.ts';

/**
 * A decision reaches Slack as one notify job (`report`): its thread reply once, then the message synced. Retries
 * never post the reply twice, and `thread-reply` jobs that an earlier version left queued still run.
 */
let env: JobsEnv;

beforeEach(async () => {
  env = await startJobsEnv({ name: 'jobs-report' });
});

afterEach(async () => {
  expect(env.slack.problems).toEqual([]);
  await env.close();
});

/** A pending request whose message is posted, as a person would find it before deciding. */
async function pendingWithMessage(): Promise<CloudRequest> {
  const created = await env.store.create({ ...resizeOf(env, 102, { cores: 6 }), state: 'pending' }, 'U0DEV');
  await enqueueNotify(env.queues, { type: 'post-request', requestId: created.id });
  for (;;) {
    const request = await env.store.get(created.id);
    if (request?.messageTs) return request;
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Every notify job of a request but its message's post, in any state. */
async function decisionJobs(id: string) {
  const jobs = await env.queues.notify.getJobs(['waiting', 'delayed', 'active', 'completed', 'failed']);
  return jobs.filter((j) => j.data.requestId === id && j.name !== 'post-request');
}

async function until(check: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The request message as Slack shows it now. */
function messageOf(request: CloudRequest) {
  return env.slack.messages(request.channel).find((m) => m.ts === request.messageTs);
}

describe('one notify job per decision', () => {
  it('a rejection adds one report job: the reply posted once, then the message synced', async () => {
    env.startWorkers();
    const request = await pendingWithMessage();
    const rejected = await env.deps.requests.reject(request, 'U0LEAD', 'not now');
    expect(rejected.ok).toBe(true);
    const replies = await waitForReplies(env, request.id, 1);
    expect(replies).toEqual([expect.stringContaining('Rejected by <@U0LEAD>')]);
    await env.slack.waitFor(() =>
      JSON.stringify(messageOf(request)?.blocks ?? []).includes('Rejected* · request'),
    );
    const jobs = await decisionJobs(request.id);
    expect(jobs.map((j) => j.name)).toEqual(['report']);
    expect(jobs[0]?.data).toMatchObject({ type: 'report', event: 'rejected' });
    await new Promise((r) => setTimeout(r, 300));
    expect(threadTexts(env, request)).toHaveLength(1);
  });

  it('a report retried after the message update failed posts its reply once, and the message is synced', async () => {
    env.startWorkers();
    const request = await pendingWithMessage();
    env.slack.failNext('chat.update', { status: 503, times: 2 });
    await env.deps.requests.reject(request, 'U0LEAD', 'not now');
    await env.slack.waitFor(
      () => JSON.stringify(messageOf(request)?.blocks ?? []).includes('Rejected* · request'),
      30_000,
    );
    const updates = env.slack.callsOf('chat.update');
    expect(updates.filter((c) => c.status === 503)).toHaveLength(2);
    // The job ran three times; the reply went out on the first run only.
    const id = `reply.${request.id}.rejected.0`;
    await until(async () => (await env.queues.notify.getJob(id))?.finishedOn !== undefined, 'the report ran');
    expect((await env.queues.notify.getJob(id))?.attemptsMade).toBe(3);
    expect(threadTexts(env, request)).toHaveLength(1);
    expect(
      env.slack.callsOf('chat.postMessage').filter((c) => c.args.thread_ts === request.messageTs),
    ).toHaveLength(1);
  });

  it("a 'thread-reply' job queued by a previous version still posts its reply, once, and a report of the same event posts none", async () => {
    env.startWorkers();
    const request = await pendingWithMessage();
    const rejected = await env.store.transition(request.id, {
      from: ['pending'],
      to: 'rejected',
      actor: 'U0LEAD',
      patch: { rejectedBy: 'U0LEAD' },
    });
    expect(rejected.ok).toBe(true);
    // As the previous version announced a decision: a message sync and a separate thread reply.
    await enqueueNotify(env.queues, { type: 'sync-message', requestId: request.id });
    await enqueueNotify(env.queues, { type: 'thread-reply', requestId: request.id, event: 'rejected' });
    expect(await waitForReplies(env, request.id, 1)).toEqual([expect.stringContaining('Rejected by')]);
    // The new version announcing the same event again (e.g. the sweeper): the same job id, so nothing is added.
    const id = `reply.${request.id}.rejected.0`;
    await until(async () => (await env.queues.notify.getJob(id))?.finishedOn !== undefined, 'the reply ran');
    await enqueueNotify(env.queues, { type: 'report', requestId: request.id, event: 'rejected' });
    expect((await env.queues.notify.getJob(id))?.name).toBe('thread-reply');
    // Once the finished job is gone (a day later), a report of the same event finds the reply's posted record.
    await env.queues.notify.remove(id);
    await enqueueNotify(env.queues, { type: 'report', requestId: request.id, event: 'rejected' });
    await until(async () => (await env.queues.notify.getJob(id))?.finishedOn !== undefined, 'the report ran');
    const report = await env.queues.notify.getJob(id);
    expect([report?.name, report?.returnvalue]).toEqual(['report', 'duplicate']);
    expect(threadTexts(env, request)).toHaveLength(1);
  });
});
