import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CHANNELS, type Harness, PROD_UUID, startHarness, USERS } from '../helpers/harness.ts';

// The whole bot (ROLE=all): web, execute and notify workers, against the cloud sim and the Slack stand-in.
let h: Harness;
beforeAll(async () => {
  h = await startHarness({ role: 'all' });
});
afterEach(() => {
  expect(h.slack.problems).toEqual([]);
});
afterAll(async () => {
  console.info(
    `slack-flow: ${h.slack.calls.length} Web API calls, ${h.slack.responses.length} response_url posts, ${h.acksChecked} acks checked`,
  );
  await h?.close();
});

type Block = { type: string; elements?: { action_id?: string; value?: string }[] };
const buttonsOf = (blocks: unknown[] | undefined) =>
  ((blocks ?? []) as Block[])
    .filter((b) => b.type === 'actions')
    .flatMap((b) => (b.elements ?? []).map((e) => e.action_id));

describe('the whole flow', () => {
  it('command → modal → request message with buttons → approve → API call once → thread reply → final message', async () => {
    const ack = await h.fillAndSubmit('resize shop-prod 102 cores=6', { reason: 'more traffic' });
    expect(ack.json).toEqual({ response_action: 'clear' });
    const request = await h.nextRequest();
    const message = await h.requestMessage(request.id);
    expect(buttonsOf(message.blocks)).toEqual(['approve', 'reject', 'cancel']);
    expect(JSON.stringify(message.blocks)).toContain('Cores: 4 → 6');
    expect(JSON.stringify(message.blocks)).toContain('more traffic');

    // Two approvers click the real message at the same moment.
    await Promise.all([
      h.click('approve', request.id, USERS.lead, CHANNELS.prod, message),
      h.click('approve', request.id, USERS.lead2, CHANNELS.prod, message),
    ]);
    const done = await h.waitForRequest(request.id, (r) => r.state === 'succeeded', 30_000);
    expect(h.sim.applied.filter((a) => a.vmid === 102)).toHaveLength(1);
    expect(h.sim.vm(PROD_UUID, 102).cores).toBe(6);

    const replies = await h.slack.waitFor(() => {
      const thread = h.slack.thread(CHANNELS.prod, message.ts);
      return thread.some((m) => (m.text ?? '').startsWith(':white_check_mark: Done')) ? thread : undefined;
    }, 30_000);
    expect(replies.map((m) => m.text?.split(' ')[0])).toEqual(['Approved', ':white_check_mark:']);
    const final = await h.requestMessage(request.id, (m) => (m.text ?? '').includes('Done'));
    expect(buttonsOf(final.blocks)).toEqual([]);
    expect(done.approvedBy === USERS.lead || done.approvedBy === USERS.lead2).toBe(true);
    // The loser of the race heard that nothing changed.
    await h.slack.waitFor(() =>
      h.slack.ephemerals(CHANNELS.prod).some((m) => (m.text ?? '').startsWith('Nothing changed')),
    );
  });

  it('an expired request loses its buttons and says so in its thread', async () => {
    await h.fillAndSubmit('resize shop-prod 104 ram=4', {});
    const request = await h.nextRequest();
    const message = await h.requestMessage(request.id);
    expect(buttonsOf(message.blocks)).toContain('approve');
    h.clock.advance(25 * 3_600_000);
    await h.click('approve', request.id, USERS.lead, CHANNELS.prod, message);
    const expired = await h.requestMessage(request.id, (m) => (m.text ?? '').includes('Expired'));
    expect(buttonsOf(expired.blocks)).toEqual([]);
    await h.slack.waitFor(() =>
      h.slack
        .thread(CHANNELS.prod, message.ts)
        .find((m) => (m.text ?? '').startsWith('Expired without an approval')),
    );
    expect(h.sim.applied.filter((a) => a.vmid === 104)).toHaveLength(0);
  });

  it('the requester cancels from the message; the message shows it and nothing is sent', async () => {
    await h.fillAndSubmit('resize shop-prod 101 disk=60', {});
    const request = await h.nextRequest();
    const message = await h.requestMessage(request.id);
    await h.click('cancel', request.id, USERS.dev, CHANNELS.prod, message);
    const cancelled = await h.requestMessage(request.id, (m) => (m.text ?? '').includes('Cancelled'));
    expect(buttonsOf(cancelled.blocks)).toEqual([]);
    expect(h.sim.applied.filter((a) => a.vmid === 101)).toHaveLength(0);
  });

  it('a restore without approval runs at once and replies with the task id', async () => {
    const view = await h.openModal(
      'restore shop-staging 201 nightly_2025-01-01',
      USERS.dev,
      CHANNELS.staging,
    );
    const ack = await h.submitView(view, { confirm: ['stopped'], typed_vmid: '201' }, USERS.dev);
    expect(ack.json).toEqual({ response_action: 'clear' });
    const request = await h.nextRequest(CHANNELS.staging);
    await h.waitForRequest(request.id, (r) => r.state === 'succeeded', 30_000);
    const message = await h.requestMessage(request.id);
    const reply = await h.slack.waitFor(() =>
      h.slack.thread(CHANNELS.staging, message.ts).find((m) => (m.text ?? '').includes('Task id')),
    );
    const taskId = h.sim.applied.find((a) => a.route === 'restore')?.taskId;
    expect(taskId).toBeDefined();
    expect(reply.text).toContain(`\`${taskId}\``);
  });

  it('an unknown outcome is said in the thread with resolve buttons; only the requester or an approver records it', async () => {
    h.sim.fault('resize', { kind: 'drop', afterApply: true });
    await h.fillAndSubmit('resize shop-prod 101 ram=8', {});
    const request = await h.nextRequest();
    const message = await h.requestMessage(request.id);
    await h.click('approve', request.id, USERS.lead2, CHANNELS.prod, message);
    await h.waitForRequest(request.id, (r) => r.state === 'unknown', 30_000);
    const reply = await h.slack.waitFor(() =>
      h.slack
        .thread(CHANNELS.prod, message.ts)
        .find((m) => (m.text ?? '').startsWith(':warning: Outcome unknown')),
    );
    expect(buttonsOf(reply.blocks)).toEqual(['resolve_done', 'resolve_failed']);
    // The change was applied once and is not sent again.
    expect(h.sim.applied.filter((a) => a.vmid === 101)).toHaveLength(1);

    const seen = h.slack.ephemerals(CHANNELS.prod, USERS.dev2).length;
    await h.click('resolve_done', request.id, USERS.dev2, CHANNELS.prod, { ts: reply.ts, text: reply.text });
    await h.slack.waitFor(() => h.slack.ephemerals(CHANNELS.prod, USERS.dev2).length === seen + 1);
    expect(h.slack.ephemerals(CHANNELS.prod, USERS.dev2).at(-1)?.text).toBe(
      'Only the requester or an approver can record the outcome.',
    );
    await h.click('resolve_done', request.id, USERS.dev, CHANNELS.prod, { ts: reply.ts, text: reply.text });
    const resolved = await h.waitForRequest(request.id, (r) => r.state === 'resolved_done');
    expect(resolved.resolvedBy).toBe(USERS.dev);
    await h.slack.waitFor(() =>
      h.slack
        .thread(CHANNELS.prod, message.ts)
        .find((m) => m.text === `<@${USERS.dev}> checked the portal: the change was applied.`),
    );
    expect(h.sim.applied.filter((a) => a.vmid === 101)).toHaveLength(1);
  });

  it('a Slack rate limit and an outage delay the reports but lose none and never repeat the API call', async () => {
    h.slack.limitPerChannel(1);
    h.slack.failNext('chat.postMessage', { status: 429, retryAfter: 1 });
    h.slack.failNext('chat.postMessage', { error: 'service_unavailable', times: 2 });
    const view = await h.openModal('resize shop-staging 201 ram=4', USERS.dev, CHANNELS.staging);
    await h.submitView(view, {}, USERS.dev);
    const request = await h.nextRequest(CHANNELS.staging);
    await h.waitForRequest(request.id, (r) => r.state === 'succeeded', 30_000);
    // The message is posted on the fourth try: after the 429's Retry-After of 1 s, then 2 s and 4 s of backoff (each
    // ±20 %), up to 8.2 s; its update to Done follows at one message a second. 8 s was not always enough.
    const final = await h.requestMessage(request.id, (m) => (m.text ?? '').includes('Done'), 30_000);
    await h.slack.waitFor(
      () =>
        h.slack
          .thread(CHANNELS.staging, final.ts)
          .find((m) => (m.text ?? '').startsWith(':white_check_mark: Done')),
      30_000,
    );
    // The first post met the 429, then the outage twice (and the per-channel limit, as it came); each was retried.
    const errors = h.slack
      .callsOf('chat.postMessage')
      .filter((c) => c.response.ok === false)
      .map((c) => c.response.error);
    expect(errors[0]).toBe('ratelimited');
    expect(errors.filter((e) => e === 'service_unavailable')).toHaveLength(2);
    expect(h.sim.applied.filter((a) => a.vmid === 201 && a.route === 'resize')).toHaveLength(1);
    // One request message, one reply: nothing posted twice.
    expect(
      h.slack.messages(CHANNELS.staging).filter((m) => (m.text ?? '').includes(`(request ${request.id})`)),
    ).toHaveLength(1);
    expect(
      h.slack.thread(CHANNELS.staging, final.ts).filter((m) => (m.text ?? '').includes('Done')),
    ).toHaveLength(1);
    h.slack.limitPerChannel(undefined);
  });
});
