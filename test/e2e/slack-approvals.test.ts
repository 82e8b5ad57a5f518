import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { auditRecords } from '../helpers/audit-records.ts';
import { CHANNELS, type Harness, startHarness, USERS } from '../helpers/harness.ts';

// The web role only: clicks are judged and queued; no worker runs the jobs, so the queue can be inspected.
let h: Harness;
beforeAll(async () => {
  h = await startHarness({ role: 'web' });
});
afterEach(() => {
  expect(h.slack.problems).toEqual([]);
});
afterAll(async () => {
  console.info(
    `slack-approvals: ${h.slack.calls.length} Web API calls, ${h.slack.responses.length} response_url posts, ${h.acksChecked} acks checked`,
  );
  await h?.close();
});

/** A fresh pending resize of VM 102 by U0DEV. */
async function pendingRequest(text = 'resize shop-prod 102 cores=6'): Promise<CloudRequest> {
  const ack = await h.fillAndSubmit(text, {});
  expect(ack.json).toEqual({ response_action: 'clear' });
  const created = await h.nextRequest();
  return h.waitForRequest(created.id, (r) => r.state === 'pending');
}

/** The ephemeral texts `user` got, waiting for `count` of them. */
async function ephemeralTexts(user: string, count: number): Promise<string[]> {
  await h.slack.waitFor(() => h.slack.ephemerals(CHANNELS.prod, user).length >= count);
  return h.slack.ephemerals(CHANNELS.prod, user).map((m) => m.text ?? '');
}

describe('approve', () => {
  it('an approver approves: the request is queued as a BullMQ job whose id is the request id', async () => {
    const request = await pendingRequest();
    const response = await h.click('approve', request.id, USERS.lead);
    expect(response.status).toBe(200);
    const queued = await h.waitForRequest(request.id, (r) => r.state === 'queued');
    expect(queued.approvedBy).toBe(USERS.lead);
    const job = await h.waitForJob(request.id);
    expect(job?.id).toBe(request.id);
    // The job carries the VM too, so the worker takes the VM's lock before reading the request, and the request as the
    // write that queued it stored it, from which the run's start predicts its move to sending.
    expect(job?.data).toEqual({
      requestId: request.id,
      vm: { projectUuid: request.projectUuid, vmid: request.vmid },
      request: expect.objectContaining({ id: request.id, state: 'queued', version: queued.version }),
    });
    // The message refresh and the thread reply go through the notify queue.
    await expect.poll(() => h.queues.notify.getJob(`reply.${request.id}.approved.0`)).toBeDefined();
  });

  it('the requester cannot approve their own request: an ephemeral says so and nothing changes', async () => {
    // U0LEAD requests, then clicks Approve on their own request.
    const ack = await h.fillAndSubmit('resize shop-prod 102 cores=10', {}, USERS.lead);
    expect(ack.json).toEqual({ response_action: 'clear' });
    const request = await h.waitForRequest((await h.nextRequest()).id, (r) => r.state === 'pending');
    const seen = h.slack.ephemerals(CHANNELS.prod, USERS.lead).length;
    await h.click('approve', request.id, USERS.lead);
    const texts = await ephemeralTexts(USERS.lead, seen + 1);
    expect(texts.at(-1)).toBe('You cannot approve your own request: another approver has to.');
    expect(await h.store.get(request.id)).toEqual(request);
    expect(await h.queues.execute.getJob(request.id)).toBeUndefined();
  });

  it('someone who is not an approver is refused, naming the approvers', async () => {
    const request = await pendingRequest();
    const seen = h.slack.ephemerals(CHANNELS.prod, USERS.dev2).length;
    await h.click('approve', request.id, USERS.dev2);
    await h.click('reject', request.id, USERS.dev2);
    const texts = await ephemeralTexts(USERS.dev2, seen + 2);
    expect(texts.slice(-2)).toEqual([
      `Only the approvers of shop-prod can approve: <@${USERS.lead}>, <@${USERS.lead2}>.`,
      'Only the approvers of shop-prod can reject.',
    ]);
    expect(await h.store.get(request.id)).toEqual(request);
  });

  it('a double click and two approvers at once queue one job, once', async () => {
    const request = await pendingRequest();
    const clicks = await Promise.all([
      h.click('approve', request.id, USERS.lead),
      h.click('approve', request.id, USERS.lead),
      h.click('approve', request.id, USERS.lead2),
      h.click('approve', request.id, USERS.lead2),
    ]);
    expect(clicks.map((c) => c.status)).toEqual([200, 200, 200, 200]);
    const queued = await h.waitForRequest(request.id, (r) => r.state === 'queued');
    const jobsOf = async () =>
      (await h.queues.execute.getJobs(['waiting', 'delayed', 'active', 'completed', 'failed'])).filter(
        (j) => j.data.requestId === request.id,
      );
    // The job is added just after the state turns queued (same handler): wait for it, then for any second one.
    await vi.waitFor(async () => expect((await jobsOf()).length).toBeGreaterThan(0), { timeout: 30_000 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const jobs = await jobsOf();
    expect(jobs).toHaveLength(1);
    const audit = await auditRecords(h.redis, h.prefix);
    const approvals = audit.filter((r) => r.request_id === request.id && r.act === 'approved');
    expect(approvals).toHaveLength(1);
    // The three clicks that lost each hear that nothing changed.
    await h.slack.waitFor(
      () =>
        h.slack
          .ephemerals(CHANNELS.prod)
          .filter((m) => (m.text ?? '').includes(`request \`${request.id}\` is already`)).length === 3,
    );
    expect(queued.approvedBy === USERS.lead || queued.approvedBy === USERS.lead2).toBe(true);
  });

  it('a forged button value or a request of another channel changes nothing', async () => {
    const request = await pendingRequest();
    const seen = h.slack.ephemerals(CHANNELS.prod, USERS.lead).length;
    await h.click('approve', 'NOTAREQ1', USERS.lead);
    await h.click('approve', `${request.id}' OR 1=1`, USERS.lead);
    const elsewhere = h.slack.ephemerals(CHANNELS.staging, USERS.lead).length;
    await h.click('approve', request.id, USERS.lead, CHANNELS.staging);
    const texts = await ephemeralTexts(USERS.lead, seen + 2);
    expect(texts.slice(-2)).toEqual([
      'This request does not exist in this channel.',
      'This request does not exist in this channel.',
    ]);
    await h.slack.waitFor(() => h.slack.ephemerals(CHANNELS.staging, USERS.lead).length === elsewhere + 1);
    expect(await h.store.get(request.id)).toEqual(request);
  });
});

describe('reject', () => {
  it('opens the reject modal and records the reason; a later approve changes nothing', async () => {
    const request = await pendingRequest();
    const seenViews = h.slack.views.length;
    await h.click('reject', request.id, USERS.lead2);
    const modal = (await h.openedView(seenViews)).view;
    expect(modal.callback_id).toBe('reject');
    expect(modal.private_metadata).toBe(request.id);
    const ack = await h.submitView(modal, { reject_reason: 'Not during the sale' }, USERS.lead2);
    expect(ack.json).toEqual({ response_action: 'clear' });
    const rejected = await h.waitForRequest(request.id, (r) => r.state === 'rejected');
    expect(rejected).toMatchObject({ rejectedBy: USERS.lead2, rejectReason: 'Not during the sale' });
    await expect.poll(() => h.queues.notify.getJob(`reply.${request.id}.rejected.0`)).toBeDefined();

    const seen = h.slack.ephemerals(CHANNELS.prod, USERS.lead).length;
    await h.click('approve', request.id, USERS.lead);
    const texts = await ephemeralTexts(USERS.lead, seen + 1);
    expect(texts.at(-1)).toContain('Nothing changed');
    expect(texts.at(-1)).toContain('Rejected');
    expect(await h.queues.execute.getJob(request.id)).toBeUndefined();
  });

  it('a reject modal submitted by a non-approver, or for a tampered id, is refused', async () => {
    const request = await pendingRequest();
    const seenViews = h.slack.views.length;
    await h.click('reject', request.id, USERS.lead);
    const modal = (await h.openedView(seenViews)).view;
    const byOther = await h.submitView(modal, { reject_reason: 'no' }, USERS.dev2);
    expect(byOther.json).toEqual({
      response_action: 'errors',
      errors: { reject_reason: 'You cannot reject this request.' },
    });
    const tampered = await h.submitView({ ...modal, private_metadata: 'ZZZZZZZZ' }, {}, USERS.lead);
    expect(tampered.json?.response_action).toBe('errors');
    expect(await h.store.get(request.id)).toEqual(request);
  });
});

describe('cancel', () => {
  it('the requester cancels; nobody else can', async () => {
    const request = await pendingRequest();
    const seen = h.slack.ephemerals(CHANNELS.prod, USERS.lead).length;
    await h.click('cancel', request.id, USERS.lead);
    expect((await ephemeralTexts(USERS.lead, seen + 1)).at(-1)).toBe(
      'Only the requester can cancel this request.',
    );
    await h.click('cancel', request.id, USERS.dev);
    const cancelled = await h.waitForRequest(request.id, (r) => r.state === 'cancelled');
    expect(cancelled.cancelledBy).toBe(USERS.dev);
    await expect.poll(() => h.queues.notify.getJob(`reply.${request.id}.cancelled.0`)).toBeDefined();
  });
});

describe('a scheduled downsize', () => {
  it('once approved waits as a delayed job until the allowed time; an approver may cancel it before it runs', async () => {
    const ack = await h.fillAndSubmit('resize shop-prod 103 ram=4', { confirm: ['stopped'] });
    expect(ack.json?.response_action).toBe('push');
    await h.submitView(ack.json?.view as Record<string, unknown>, {}, USERS.dev);
    const request = await h.waitForRequest((await h.nextRequest()).id, (r) => r.state === 'pending');
    expect(request.runAt).toBeDefined();
    await h.click('approve', request.id, USERS.lead);
    await h.waitForRequest(request.id, (r) => r.state === 'queued');
    const job = await h.waitForJob(request.id);
    expect(await job?.getState()).toBe('delayed');
    // The delay is measured on the injected clock: until runAt, about 22 hours.
    const runAt = new Date(request.runAt ?? 0).getTime();
    expect(Math.abs((job?.delay ?? 0) - (runAt - h.clock.now().getTime()))).toBeLessThan(1000);

    const seen = h.slack.ephemerals(CHANNELS.prod, USERS.dev2).length;
    await h.click('cancel', request.id, USERS.dev2);
    expect((await ephemeralTexts(USERS.dev2, seen + 1)).at(-1)).toBe(
      'Only the requester can cancel this request.',
    );
    await h.click('cancel', request.id, USERS.lead2);
    const cancelled = await h.waitForRequest(request.id, (r) => r.state === 'cancelled');
    expect(cancelled.cancelledBy).toBe(USERS.lead2);
    await expect.poll(() => h.queues.execute.getJob(request.id)).toBeUndefined();
  });
});

describe('expiry', () => {
  it('past approval_ttl_hours an approval is refused and the request expires', async () => {
    const request = await pendingRequest();
    h.clock.advance(24 * 3_600_000 + 60_000);
    const seen = h.slack.ephemerals(CHANNELS.prod, USERS.lead).length;
    await h.click('approve', request.id, USERS.lead);
    expect((await ephemeralTexts(USERS.lead, seen + 1)).at(-1)).toBe(
      `Request \`${request.id}\` has expired; ask for a new one.`,
    );
    await h.waitForRequest(request.id, (r) => r.state === 'expired');
    expect(await h.queues.execute.getJob(request.id)).toBeUndefined();
    await expect.poll(() => h.queues.notify.getJob(`reply.${request.id}.expired.0`)).toBeDefined();
  });

  it('a reject past the expiry, by button or from a modal left open, expires the request instead', async () => {
    const first = await pendingRequest();
    const seenViews = h.slack.views.length;
    await h.click('reject', first.id, USERS.lead);
    const modal = (await h.openedView(seenViews)).view;
    const second = await pendingRequest();
    h.clock.advance(24 * 3_600_000 + 60_000);

    const fromModal = await h.submitView(modal, { reject_reason: 'too late' }, USERS.lead);
    expect(fromModal.json).toEqual({
      response_action: 'errors',
      errors: { reject_reason: `Request \`${first.id}\` has expired; ask for a new one.` },
    });
    expect((await h.store.get(first.id))?.state).toBe('expired');

    const views = h.slack.views.length;
    const seen = h.slack.ephemerals(CHANNELS.prod, USERS.lead).length;
    await h.click('reject', second.id, USERS.lead);
    expect((await ephemeralTexts(USERS.lead, seen + 1)).at(-1)).toBe(
      `Request \`${second.id}\` has expired; ask for a new one.`,
    );
    expect(h.slack.views.length).toBe(views);
    const expired = await h.store.get(second.id);
    expect(expired?.state).toBe('expired');
    expect(expired?.rejectedBy).toBeUndefined();
  });
});
