import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CloudApiClient, FAST_TIMEOUTS } from '../../src/cloud/client.ts';
import { ACTIONS } from '../../src/slack/blocks/request-message.ts';
import { PROJECT } from '../fixtures/requests.ts';
import { startForwardProxy } from '../helpers/proxies.ts';
import { type JobsEnv, resizeOf, startJobsEnv, waitForReplies } from './jobs-env.ts';

let env: JobsEnv;

beforeEach(async () => {
  env = await startJobsEnv({ name: 'jobs-faults' });
});

afterEach(async () => {
  expect(env.slack.problems).toEqual([]);
  await env.close();
});

const FINAL = ['succeeded', 'refused', 'unknown'] as const;
const resizeCalls = () => env.sim.calls.filter((c) => c.route === 'resize');

describe('execution: retries only what surely did not reach the API', () => {
  it('429 with Retry-After, then success: retried after the delay, exactly one applied change', async () => {
    env.sim.fault('resize', { kind: 'status', status: 429, retryAfter: 1 });
    env.startWorkers();
    const request = await env.queueRequest(resizeOf(env, 102, { cores: 6 }));
    const done = await env.waitForState(request.id, [...FINAL]);
    expect(done.state).toBe('succeeded');
    const calls = resizeCalls();
    expect(calls.map((c) => c.status)).toEqual([429, expect.any(Number)]);
    expect((calls[1]?.startMs ?? 0) - (calls[0]?.endMs ?? 0)).toBeGreaterThanOrEqual(950);
    expect(env.sim.applied.filter((a) => a.vmid === 102)).toHaveLength(1);
    expect(await waitForReplies(env, request.id, 1)).toHaveLength(1);
  });

  it('503 twice, then success: one applied change', async () => {
    env.sim.fault('resize', { kind: 'status', status: 503, times: 2 });
    env.startWorkers();
    const request = await env.queueRequest(resizeOf(env, 102, { ramGb: 16 }));
    const done = await env.waitForState(request.id, [...FINAL]);
    expect(done.state).toBe('succeeded');
    expect(resizeCalls().map((c) => c.status)).toEqual([503, 503, expect.any(Number)]);
    expect(env.sim.applied).toHaveLength(1);
  });
});

describe('execution: a proxy refusing the call', () => {
  it('407 twice (nothing passed on), then through: retried as not sent, one applied change, no "outcome unknown"', async () => {
    const proxy = await startForwardProxy({ refuseFirst: { status: 407, times: 2 } });
    const cloud = new CloudApiClient({
      baseUrl: env.sim.url,
      apiKey: env.sim.apiKey,
      timeouts: FAST_TIMEOUTS,
      proxy: { HTTP_PROXY: `http://ops:s3cret@127.0.0.1:${proxy.port}` },
    });
    try {
      env.startWorkers({ cloud });
      const request = await env.queueRequest(resizeOf(env, 102, { cores: 6 }));
      const done = await env.waitForState(request.id, [...FINAL]);
      expect(done.state, JSON.stringify(done.outcomes)).toBe('succeeded');
      expect(proxy.calls.map((c) => `${c.method} ${new URL(c.target).pathname}`)).toEqual(
        Array(3).fill(`POST /cloud/project/${PROJECT.uuid}/vm/102/upgrade/`),
      );
      expect(resizeCalls()).toHaveLength(1);
      expect(env.sim.applied).toHaveLength(1);
      expect(JSON.stringify(done)).not.toContain('s3cret');
    } finally {
      await cloud.close();
      await proxy.close();
    }
  });
});

describe('execution: an unknown outcome is never resent', () => {
  const cases = [
    { name: 'a timeout after the change was applied', fault: { kind: 'hang' as const, afterApply: true } },
    {
      name: 'a 500 after the change was applied',
      fault: { kind: 'status' as const, status: 500, afterApply: true },
    },
    { name: 'a connection reset after applying', fault: { kind: 'drop' as const, afterApply: true } },
  ];
  for (const c of cases) {
    it(`${c.name} → unknown, one change in the sim, a reply with what to check and the resolve buttons`, async () => {
      env.sim.fault('resize', c.fault);
      env.startWorkers();
      const request = await env.queueRequest(resizeOf(env, 102, { cores: 8 }));
      const done = await env.waitForState(request.id, [...FINAL]);
      expect(done.state).toBe('unknown');
      expect(done.outcomes[0]?.reason).toBeTruthy();
      expect(env.sim.applied).toHaveLength(1);
      expect(env.sim.vm(PROJECT.uuid, 102).cores).toBe(8);

      const replies = await waitForReplies(env, request.id, 1);
      expect(replies[0]).toMatch(/^:warning: Outcome unknown: /);
      expect(replies[0]).toContain('Check the size and WAN mode of VM 102 in the portal');
      // The message's ts as stored once the reply is there: the request can reach 'unknown' before it is written.
      const messageTs = (await env.store.get(request.id))?.messageTs;
      const reply = env.slack.thread('C0PROD', messageTs ?? '')[0];
      expect(JSON.stringify(reply?.blocks)).toContain(ACTIONS.resolveDone);
      expect(JSON.stringify(reply?.blocks)).toContain(ACTIONS.resolveFailed);

      // Time for any retry to happen: there must be none.
      await new Promise((r) => setTimeout(r, 1_500));
      expect(resizeCalls()).toHaveLength(1);
      expect((await env.store.get(request.id))?.state).toBe('unknown');
    });
  }
});

describe('reporting is a step of its own', () => {
  it('Slack answering 429 to the reply: the reply arrives later, exactly once, and the API is called once', async () => {
    env.startWorkers();
    const request = await env.queueRequest(resizeOf(env, 102, { cores: 6 }));
    // Let the request message go out first, then rate-limit the next chat.postMessage (the thread reply).
    await env.slack.waitFor(() => env.slack.callsOf('chat.postMessage').length >= 1);
    env.slack.failNext('chat.postMessage', { status: 429, retryAfter: 1, times: 2 });
    const done = await env.waitForState(request.id, [...FINAL]);
    expect(done.state).toBe('succeeded');
    const replies = await waitForReplies(env, request.id, 1, 30_000);
    expect(replies).toHaveLength(1);
    expect(env.slack.callsOf('chat.postMessage').filter((c) => c.status === 429)).toHaveLength(2);
    await new Promise((r) => setTimeout(r, 500));
    const messageTs = (await env.store.get(request.id))?.messageTs;
    expect(env.slack.thread('C0PROD', messageTs ?? '')).toHaveLength(1);
    expect(resizeCalls()).toHaveLength(1);
    const errors = (await env.metrics.slackErrors.get()).values;
    expect(errors.find((v) => v.labels.method === 'chat.postMessage')?.value).toBe(2);
  });

  it('Slack down while posting the request message: the message and reply arrive once it is back', async () => {
    env.slack.failNext('chat.postMessage', { status: 503, times: 3 });
    env.startWorkers();
    const request = await env.queueRequest(resizeOf(env, 102, { cores: 6 }));
    const done = await env.waitForState(request.id, [...FINAL]);
    expect(done.state).toBe('succeeded');
    const replies = await waitForReplies(env, request.id, 1, 30_000);
    expect(replies).toHaveLength(1);
    expect(env.slack.messages('C0PROD').filter((m) => !m.thread_ts)).toHaveLength(1);
    expect(resizeCalls()).toHaveLength(1);
    // The outage is one short line when it starts and one when Slack answers again, not a line per retry.
    const entries = env.logs.map(
      (line) => JSON.parse(line) as { level: string; msg: string; failed?: number },
    );
    expect(entries.filter((e) => e.msg.startsWith('slack web api unavailable'))).toMatchObject([
      { level: 'warn' },
    ]);
    expect(entries.filter((e) => e.msg.startsWith('slack web api back'))).toMatchObject([
      { level: 'info', failed: 3 },
    ]);
    expect(
      env.logs.filter((line) => line.includes('"stack"')),
      env.logs.join(''),
    ).toEqual([]);
    expect(Math.max(...env.logs.map((line) => line.length))).toBeLessThan(500);
  });
});
