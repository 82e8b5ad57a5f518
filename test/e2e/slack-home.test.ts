import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { auditRecords } from '../helpers/audit-records.ts';
import { CHANNELS, type Harness, startHarness, USERS } from '../helpers/harness.ts';
import { clickOnHome, homeAfter, homeButtons, openHome } from '../helpers/slack-events.ts';

// The web role: App Home opens are answered by the web process itself (no worker needed to publish them while the
// views.publish budget allows).
let h: Harness;
beforeAll(async () => {
  h = await startHarness({ role: 'web' });
});
afterEach(() => {
  expect(h.slack.problems).toEqual([]);
});
afterAll(async () => {
  const publishes = h.slack.callsOf('views.publish');
  console.info(`slack-home: ${publishes.length} views.publish calls, all checked against home_view`);
  await h?.close();
});

async function pendingRequest(text = 'resize shop-prod 102 cores=6', user: string = USERS.dev) {
  // The injected clock stands still unless moved: one second apart, so "oldest first" has an order to show.
  h.clock.advance(1000);
  const ack = await h.fillAndSubmit(text, {}, user);
  expect(ack.json).toEqual({ response_action: 'clear' });
  return h.waitForRequest((await h.nextRequest()).id, (r) => r.state === 'pending');
}

/** `user` opens their Home tab; the home it publishes. */
async function home(user: string) {
  const seen = h.slack.homes.length;
  const response = await openHome(h, user);
  expect(response.status).toBe(200);
  return homeAfter(h, user, seen);
}

/** The text of the modal the bot opened after `seen` views (a click on the home changed nothing). */
async function noticeAfter(seen: number): Promise<string> {
  const view = (await h.openedView(seen)).view;
  return JSON.stringify(view.blocks);
}

describe('App Home', () => {
  let first: CloudRequest;
  let second: CloudRequest;

  it('lists what waits for an approver, oldest first, with the channel message’s Approve and Reject', async () => {
    first = await pendingRequest('resize shop-prod 102 cores=6');
    second = await pendingRequest('resize shop-prod 101 ram=8');
    const lead = await home(USERS.lead);
    const buttons = homeButtons(lead.blocks).filter((b) => b.value === first.id || b.value === second.id);
    expect(buttons).toEqual([
      { action: 'approve', value: first.id },
      { action: 'reject', value: first.id },
      { action: 'approve', value: second.id },
      { action: 'reject', value: second.id },
    ]);
    expect(lead.text).toContain('Waiting for your approval');
    expect(lead.text).toContain('Cores: 4 → 6');
    expect(lead.text).toContain(`<@${USERS.dev}>`);
  });

  it('shows the requester their own requests with state and Cancel, and nothing to approve', async () => {
    const dev = await home(USERS.dev);
    expect(dev.text).toContain('Nothing is waiting for you.');
    expect(dev.text).toContain('Your recent requests');
    expect(dev.text).toContain(first.id);
    expect(dev.text).toContain('Waiting for approval');
    const own = homeButtons(dev.blocks).filter((b) => b.value === first.id);
    expect(own).toEqual([{ action: 'cancel', value: first.id }]);
    // Someone neither requester nor approver sees none of it.
    const other = await home(USERS.dev2);
    expect(other.text).not.toContain(first.id);
    expect(other.text).toContain('Nothing is waiting for you.');
  });

  it('approving from the home goes through the same checks and queues one job, once', async () => {
    // Opened in the first test, the lead's home still shows the request (opening it again would publish the same).
    expect(JSON.stringify(h.slack.homeOf(USERS.lead))).toContain(first.id);
    const [a, b] = await Promise.all([
      clickOnHome(h, 'approve', first.id, USERS.lead),
      clickOnHome(h, 'approve', first.id, USERS.lead2),
    ]);
    expect([a.status, b.status]).toEqual([200, 200]);
    const queued = await h.waitForRequest(first.id, (r) => r.state === 'queued');
    expect([USERS.lead, USERS.lead2]).toContain(queued.approvedBy);
    await expect.poll(() => h.queues.execute.getJob(first.id)).toBeDefined();
    const audit = await auditRecords(h.redis, h.prefix);
    const approvals = audit.filter((r) => r.request_id === first.id && r.act === 'approved');
    expect(approvals).toHaveLength(1);
    // The click that lost is told so in a modal (a home has no ephemeral messages).
    const notice = await h.slack.waitFor(() =>
      h.slack.views.find((v) => JSON.stringify(v.view).includes(`request \`${first.id}\` is already`)),
    );
    expect(notice.method).toBe('views.open');
    // Approved, it leaves the approvers' homes.
    expect((await home(USERS.lead)).text).not.toContain(first.id);
  });

  it('the requester and a non-approver are refused from the home, and nothing changes', async () => {
    let seen = h.slack.views.length;
    await clickOnHome(h, 'approve', second.id, USERS.dev);
    expect(await noticeAfter(seen)).toContain(
      'You cannot approve your own request: another approver has to.',
    );
    seen = h.slack.views.length;
    await clickOnHome(h, 'reject', second.id, USERS.dev);
    expect(await noticeAfter(seen)).toContain('To withdraw your own request, use Cancel.');
    seen = h.slack.views.length;
    await clickOnHome(h, 'approve', second.id, USERS.dev2);
    expect(await noticeAfter(seen)).toContain(
      `Only the approvers of shop-prod can approve: <@${USERS.lead}>, <@${USERS.lead2}>.`,
    );
    seen = h.slack.views.length;
    await clickOnHome(h, 'approve', 'NOTAREQ1', USERS.lead);
    expect(await noticeAfter(seen)).toContain('This request does not exist.');
    expect(await h.store.get(second.id)).toEqual(second);
    expect(await h.queues.execute.getJob(second.id)).toBeUndefined();
  });

  it('rejecting from the home opens the same reason modal; the submission rejects it', async () => {
    const seen = h.slack.views.length;
    await clickOnHome(h, 'reject', second.id, USERS.lead2);
    const modal = (await h.openedView(seen)).view;
    expect(modal.callback_id).toBe('reject');
    const ack = await h.submitView(modal, { reject_reason: 'Not now' }, USERS.lead2);
    expect(ack.json).toEqual({ response_action: 'clear' });
    const rejected = await h.waitForRequest(second.id, (r) => r.state === 'rejected');
    expect(rejected).toMatchObject({ rejectedBy: USERS.lead2, rejectReason: 'Not now' });
    const dev = await home(USERS.dev);
    expect(dev.text).toContain('Rejected');
    expect(homeButtons(dev.blocks).filter((b) => b.value === second.id)).toEqual([]);
  });

  it('the requester cancels from their home', async () => {
    const request = await pendingRequest('resize shop-prod 104 cores=3');
    await home(USERS.dev);
    await clickOnHome(h, 'cancel', request.id, USERS.dev);
    const cancelled = await h.waitForRequest(request.id, (r) => r.state === 'cancelled');
    expect(cancelled.cancelledBy).toBe(USERS.dev);
  });

  it('lists the pricing digests of the channels its requests live in', async () => {
    const subscribed = await h.command('digest daily 09:00 Europe/Berlin', USERS.dev, CHANNELS.prod);
    expect(subscribed.status).toBe(200);
    const dev = await home(USERS.dev);
    expect(dev.text).toContain('Pricing digests in your channels');
    expect(dev.text).toContain(`<#${CHANNELS.prod}>`);
    await h.command('digest off', USERS.dev, CHANNELS.prod);
    expect((await home(USERS.dev)).text).not.toContain('Pricing digests in your channels');
  });

  it('stays within 100 blocks however much waits: the oldest 30, then how many more and where', async () => {
    const made: CloudRequest[] = [];
    for (let i = 0; i < 34; i++)
      made.push(await pendingRequest(`resize shop-prod 102 cores=${8 + (i % 20)}`));
    const lead = await home(USERS.lead);
    expect(lead.blocks.length).toBeLessThanOrEqual(100);
    const approveIds = homeButtons(lead.blocks)
      .filter((b) => b.action === 'approve')
      .map((b) => b.value);
    expect(approveIds).toHaveLength(30);
    // Oldest first: everything still waiting, in creation order, cut at 30.
    const waiting = (await h.requests())
      .filter((r) => r.state === 'pending')
      .sort((x, y) => x.createdAt.localeCompare(y.createdAt));
    expect(approveIds).toEqual(waiting.slice(0, 30).map((r) => r.id));
    expect(lead.text).toContain(`and ${waiting.length - 30} more waiting for you`);
    expect(lead.text).toContain('<#C0PROD>');
    expect(made).toHaveLength(34);
  });
});
