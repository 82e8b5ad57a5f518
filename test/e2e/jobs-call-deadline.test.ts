import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CHANNELS, type Harness, STAGING_UUID, startHarness, USERS } from '../helpers/harness.ts';
import { startTrickleProxy, type TrickleProxy } from '../helpers/proxies.ts';

// The whole bot with the cloud API behind a proxy that can trickle answers, and a whole call's deadline of 1 s.
const DEADLINE_MS = 1_000;
let h: Harness;
let proxy: TrickleProxy | undefined;
beforeAll(async () => {
  h = await startHarness({
    role: 'all',
    env: async (sim) => {
      proxy = await startTrickleProxy(sim.url);
      return { CLOUD_API_URL: proxy.url, CLOUD_API_DEADLINE_MS: String(DEADLINE_MS) };
    },
  });
});
afterEach(() => {
  expect(h.slack.problems).toEqual([]);
});
afterAll(async () => {
  await h?.close();
  await proxy?.close();
});

describe('a whole API call has a deadline (docs/operations.md#deadlines)', () => {
  it('an answer trickling one byte every 2 s ends as outcome unknown, said in the thread, and the VM lock is freed', async () => {
    // Each gap is far under the body timeout (30 s): only the whole call's deadline can end this call.
    proxy?.trickle((method, path) => method === 'POST' && path.endsWith('/upgrade/'), 2_000);
    const view = await h.openModal('resize shop-staging 201 ram=4', USERS.dev, CHANNELS.staging);
    const ack = await h.submitView(view, {}, USERS.dev);
    expect(ack.json).toEqual({ response_action: 'clear' });
    const request = await h.nextRequest(CHANNELS.staging);
    const unknown = await h.waitForRequest(request.id, (r) => r.state === 'unknown', 30_000);
    expect(unknown.outcomes[0]?.reason).toContain(
      '1 s after the request was sent (the deadline of a whole call)',
    );
    const message = await h.requestMessage(request.id);
    const reply = await h.slack.waitFor(() =>
      h.slack
        .thread(CHANNELS.staging, message.ts)
        .find((m) => (m.text ?? '').startsWith(':warning: Outcome unknown')),
    );
    expect(reply.text).toContain('the deadline of a whole call');
    // The call reached the API (the proxy forwarded it) and was never sent again.
    expect(h.sim.applied.filter((a) => a.vmid === 201)).toHaveLength(1);
    expect(proxy?.trickledBytes).toBeGreaterThan(0);
    expect(await h.redis.exists(`${h.prefix}:vmlock:${STAGING_UUID}:201`)).toBe(0);

    // The next request for that VM is not stuck behind the abandoned call.
    proxy?.trickle(() => false, 0);
    const next = await h.openModal('resize shop-staging 201 cores=2', USERS.dev, CHANNELS.staging);
    await h.submitView(next, {}, USERS.dev);
    const second = await h.nextRequest(CHANNELS.staging);
    await h.waitForRequest(second.id, (r) => r.state === 'succeeded', 30_000);
    expect(h.sim.applied.filter((a) => a.vmid === 201)).toHaveLength(2);
  });
});
