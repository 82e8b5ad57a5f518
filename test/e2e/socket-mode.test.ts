import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buttonsOf, CHANNELS, type Harness, PROD_UUID, startHarness, USERS } from '../helpers/harness.ts';
import { viewState, viewSubmissionPayload } from '../helpers/slack-request.ts';

// The whole bot (ROLE=all) in Socket Mode: commands, clicks and submissions arrive as envelopes on the WebSocket
// stand-in, acks go back by envelope_id, Web API calls go to the HTTP stand-in, which checks them. Every HTTP e2e
// flow (restore, expiry, schedules, pricing…) runs over the socket too: the `e2e-socket` project in vitest.config.ts.
let h: Harness;
beforeAll(async () => {
  h = await startHarness({ role: 'all', mode: 'socket' });
});
afterEach(() => {
  expect(h.slack.problems).toEqual([]);
});
afterAll(async () => {
  const ms = h.slack.socket.acks.map((a) => a.ms).sort((a, b) => a - b);
  console.info(
    `socket-mode: ${h.slack.socket.envelopes.length} envelopes, ${ms.length} acks, median ack ${ms[Math.floor(ms.length / 2)]?.toFixed(1)} ms, ${h.slack.socket.connections} connections`,
  );
  await h?.close();
});

async function readyz(): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await request(`${h.baseUrl}/readyz`);
  return { status: response.statusCode, body: (await response.body.json()) as Record<string, unknown> };
}

describe('the link', () => {
  it('opens with apps.connections.open and the app-level token; /readyz counts the link', async () => {
    expect(h.slack.callsOf('apps.connections.open')).toHaveLength(1);
    expect(h.slack.socket.open).toBe(1);
    expect(await readyz()).toEqual({
      status: 200,
      // The cloud API's check runs beside the start-up and is never a reason for 503.
      body: {
        status: 'ready',
        redis: true,
        policy: true,
        policyVersion: expect.stringMatching(/^[0-9a-f]{12}$/),
        slack: true,
        cloud: expect.any(Boolean),
      },
    });
    const health = await request(`${h.baseUrl}/healthz`);
    expect(health.statusCode).toBe(200);
    await health.body.dump();
  });
});

describe('the flows, over the socket', () => {
  it('command → modal → field errors in the ack → request → approvals → one API call → thread reply', async () => {
    const view = await h.openModal('resize shop-prod 102');
    const wrong = await h.submitView(view, { cores: '999', ram_gb: '2.5' }, USERS.dev);
    expect(wrong.json?.response_action).toBe('errors');
    expect((wrong.json?.errors as Record<string, string> | undefined)?.cores).toContain(
      'must be from 1 to 32',
    );
    // The errors travelled back in the ack of the view_submission envelope; delivered again (as when that ack was
    // lost with its socket), the submission gets the same errors.
    const errorsAck = h.slack.socket.acks.at(-1);
    expect(errorsAck?.payload).toEqual(wrong.json);
    const again = await h.slack.socket.redeliver(errorsAck?.envelopeId ?? '');
    expect(again.payload).toEqual(wrong.json);

    const ack = await h.submitView(view, { cores: '6', reason: 'more traffic' }, USERS.dev);
    expect(ack.json).toEqual({ response_action: 'clear' });
    const created = await h.nextRequest();
    const message = await h.requestMessage(created.id);
    expect(buttonsOf(message.blocks)).toEqual(['approve', 'reject', 'cancel']);

    // Both approvers click at once; each click is an envelope of its own on the one socket.
    const clicks = await Promise.all(
      [USERS.lead, USERS.lead2].map((u) => h.click('approve', created.id, u, CHANNELS.prod, message)),
    );
    expect(clicks.map((c) => c.status)).toEqual([200, 200]);
    await h.waitForRequest(created.id, (r) => r.state === 'succeeded', 30_000);
    expect(h.sim.applied.filter((a) => a.vmid === 102).length).toBe(1);
    expect(h.sim.vm(PROD_UUID, 102).cores).toBe(6);
    const done = await h.slack.waitFor(
      () =>
        h.slack
          .thread(CHANNELS.prod, message.ts)
          .find((m) => (m.text ?? '').startsWith(':white_check_mark: Done')),
      30_000,
    );
    expect(done.thread_ts).toBe(message.ts);
  });

  it('a digest command subscribes the channel, and `digest now` posts the digest', async () => {
    const sub = await h.command('digest daily 09:00 Europe/Paris', USERS.dev, CHANNELS.staging);
    const id = sub.responseUrl.split('/').at(-1);
    const answer = await h.slack.waitFor(() => h.slack.responses.find((r) => r.id === id), 30_000);
    expect(String(answer.body.text)).toContain('subscribed this channel to the pricing digest');
    await h.command('digest now', USERS.dev, CHANNELS.staging);
    const digest = await h.slack.waitFor(
      () => h.slack.messages(CHANNELS.staging).find((m) => (m.text ?? '').startsWith('Pricing digest')),
      30_000,
    );
    expect(JSON.stringify(digest.blocks)).toContain('First digest in this channel');
  });
});

describe('reconnects', () => {
  it.each(['refresh_requested', 'warning'] as const)(
    'a `disconnect` (%s) is followed by a new link, and commands work on it',
    async (reason) => {
      const before = h.slack.socket.connections;
      const opened = h.slack.callsOf('apps.connections.open').length;
      h.slack.socket.disconnect(reason);
      await h.slack.socket.waitForConnection(before + 1, 30_000);
      // A fresh URL for each link: tickets are single-use.
      expect(h.slack.callsOf('apps.connections.open')).toHaveLength(opened + 1);
      const answer = await h.command('help');
      expect(answer.json?.response_type).toBe('ephemeral');
      expect(h.slack.socket.acks.at(-1)?.connection).toBe(before + 1);
      expect((await readyz()).body.slack).toBe(true);
    },
  );

  it('a dropped socket: /readyz says 503 while the link is down, then the link comes back with backoff', async () => {
    const before = h.slack.socket.connections;
    // The next three upgrades fail: the link waits 50, 100, 200 ms (the test policy) between attempts.
    h.slack.socket.refuseConnections(3);
    h.slack.socket.drop();
    await h.slack.socket.waitForNoConnection(2000);
    const down = await readyz();
    expect(down).toEqual({
      status: 503,
      body: {
        status: 'not ready',
        redis: true,
        policy: true,
        policyVersion: expect.stringMatching(/^[0-9a-f]{12}$/),
        slack: false,
        cloud: expect.any(Boolean),
      },
    });
    const openCalls = h.slack.callsOf('apps.connections.open').length;
    await h.slack.socket.waitForConnection(before + 1, 30_000);
    expect(h.slack.callsOf('apps.connections.open').length).toBeGreaterThanOrEqual(openCalls + 1);
    await h.slack.waitFor(() => h.slack.socket.open === 1);
    const up = await new Promise<Awaited<ReturnType<typeof readyz>>>((resolve, reject) => {
      const deadline = Date.now() + 30_000;
      const poll = async () => {
        const r = await readyz();
        if (r.status === 200) return resolve(r);
        if (Date.now() > deadline) return reject(new Error(`still ${r.status}`));
        setTimeout(() => void poll(), 20);
      };
      void poll();
    });
    expect(up.body.slack).toBe(true);
    expect((await h.command('help')).json?.response_type).toBe('ephemeral');
  });
});

describe('redelivery', () => {
  it('a view submission delivered again (retry_attempt) gets the same answer and creates no second request', async () => {
    const view = await h.openModal('resize shop-prod 101 disk=60');
    const payload = viewSubmissionPayload(
      { user: USERS.dev, channel: CHANNELS.prod, teamId: h.slack.teamId },
      view,
      viewState(view, {}),
      h.slack.triggerId(),
    );
    const first = await h.slack.socket.deliver('interactive', payload);
    expect(first.payload).toEqual({ response_action: 'clear' });
    const created = await h.nextRequest();
    const message = await h.requestMessage(created.id);
    const requestsBefore = (await h.requests()).map((r) => r.id);
    const messagesBefore = h.slack.messages(CHANNELS.prod).length;

    const again = await h.slack.socket.redeliver(first.envelopeId);
    expect(again.payload).toEqual({ response_action: 'clear' });
    expect(h.slack.socket.envelopes.at(-1)).toMatchObject({
      envelope_id: first.envelopeId,
      retry_attempt: 1,
    });
    // The same payload under a new envelope id (a delivery on another connection) is caught as well.
    const third = await h.slack.socket.deliver('interactive', payload, {
      retryAttempt: 2,
      retryReason: 'timeout',
    });
    expect(third.payload).toEqual({ response_action: 'clear' });
    await new Promise((r) => setTimeout(r, 300));
    expect((await h.requests()).map((r) => r.id)).toEqual(requestsBefore);
    expect(h.slack.messages(CHANNELS.prod)).toHaveLength(messagesBefore);
    expect(message.text).toContain(created.id);
  });

  it('an approve click delivered twice runs the API call once and answers once', async () => {
    await h.fillAndSubmit('resize shop-prod 104 ram=4', {});
    const created = await h.nextRequest();
    const message = await h.requestMessage(created.id);
    const applied = h.sim.applied.length;
    await h.click('approve', created.id, USERS.lead, CHANNELS.prod, message);
    const click = h.slack.socket.envelopes.at(-1);
    expect(click?.payload.type).toBe('block_actions');
    await h.waitForRequest(created.id, (r) => r.state === 'succeeded', 30_000);
    const heard = h.slack.ephemerals(CHANNELS.prod, USERS.lead).length;
    // Acted on again, the click would tell the approver "Nothing changed"; it is acked and dropped instead.
    const again = await h.slack.socket.redeliver(click?.envelope_id ?? '');
    expect(again.payload).toBeUndefined();
    await new Promise((r) => setTimeout(r, 300));
    expect(h.slack.ephemerals(CHANNELS.prod, USERS.lead)).toHaveLength(heard);
    expect(h.sim.applied.length).toBe(applied + 1);
  });

  it('an events_api envelope is acked, and its retry too', async () => {
    const event = {
      token: 'deprecated',
      team_id: h.slack.teamId,
      api_app_id: 'A0CLOUDOPS',
      type: 'event_callback',
      event_id: 'Ev0SOCKETTEST',
      event_time: Math.floor(Date.now() / 1000),
      event: {
        type: 'app_mention',
        user: USERS.dev,
        text: 'pineapple-on-the-socket',
        channel: CHANNELS.prod,
        ts: '1.000001',
      },
    };
    const first = await h.slack.socket.deliver('events_api', event);
    expect(first.payload).toBeUndefined();
    const retry = await h.slack.socket.redeliver(first.envelopeId);
    expect(retry.payload).toBeUndefined();
    expect(h.logs.join('\n')).not.toContain('pineapple-on-the-socket');
  });
});

describe('secrets', () => {
  it('the app-level token and the socket ticket appear in no log line', () => {
    const logs = h.logs.join('\n');
    expect(logs).not.toContain(h.slack.socket.appToken);
    expect(logs).not.toMatch(/ticket=(?!\[redacted\])/);
  });
});
