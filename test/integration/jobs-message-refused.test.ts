import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FAST_TIMEOUTS } from '../../src/cloud/client.ts';
import { enqueueExecution, enqueueNotify } from '../../src/jobs/queues.ts';
import { approveSealed } from '../helpers/seal.ts';
import { type JobsEnv, resizeOf, startJobsEnv } from './jobs-env.ts';

let env: JobsEnv;

beforeEach(async () => {
  // The resize is held 800 ms so the message is posted while it runs: FAST_TIMEOUTS' 800 ms wait for the answer's
  // headers would race it (a loaded run ended it 'unknown'), so this file waits 5 s.
  env = await startJobsEnv({
    name: 'jobs-refused',
    cloudTimeouts: { ...FAST_TIMEOUTS, headersMs: 5_000, bodyMs: 5_000, totalMs: 10_000 },
  });
});

afterEach(async () => {
  expect(env.slack.problems).toEqual([]);
  await env.close();
});

describe('a request whose message Slack refuses while it already runs', () => {
  it('is not cancelled; the requester hears why, and its outcome comes to them directly, once', async () => {
    env.slack.leaveChannel('C0PROD');
    env.sim.fault('resize', { kind: 'latency', ms: 800 });
    env.startWorkers();
    // Approved (sealed) before its message was posted: it runs while the post is refused.
    const made = await env.store.create(resizeOf(env, 102, { cores: 6 }), 'U0DEV');
    const request = await approveSealed(env.store, made, 'U0LEAD');
    await enqueueExecution(env.queues, request, new Date());
    await env.waitForState(request.id, ['sending']);
    await enqueueNotify(env.queues, { type: 'post-request', requestId: request.id });

    const done = await env.waitForState(request.id, ['succeeded']);
    expect(done.messageTs).toBeUndefined();
    const told = await env.slack.waitFor(() => {
      const texts = env.slack.messages(request.requester).map((m) => m.text ?? '');
      return texts.length >= 2 ? texts : undefined;
    });
    expect(told[0]).toContain('cloudops is not a member of <#C0PROD>');
    expect(told[0]).toContain('had already started: its outcome comes to you here');
    expect(told[1]).toMatch(/^:white_check_mark: Done/);
    await new Promise((r) => setTimeout(r, 500));
    expect(env.slack.messages(request.requester)).toHaveLength(2);
    expect(env.sim.applied).toHaveLength(1);
  });
});
