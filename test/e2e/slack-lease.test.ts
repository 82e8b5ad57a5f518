import { describe, expect, it } from 'vitest';
import { dueKey } from '../../src/jobs/due-times.ts';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { botPerFile } from '../helpers/bot-per-file.ts';
import { CHANNELS, USERS } from '../helpers/harness.ts';

// Temporary increases (docs/policy.md#temporary-changes-leases) through the whole bot: signed HTTP in, the
// cloud sim and the Slack stand-in out, one shared clock the test moves.
const START = new Date('2026-11-24T14:00:00Z');

const h = botPerFile({
  role: 'all',
  now: START,
  startOptions: { duePolicy: { pollMs: 50, leaseMs: 60_000, batch: 50 } },
});

type Errors = Record<string, string>;
const errorsOf = (json: Record<string, unknown> | undefined): Errors => {
  expect(json?.response_action).toBe('errors');
  return json?.errors as Errors;
};
type Block = { block_id?: string; type: string; element?: Record<string, unknown> };
const blockOf = (view: Record<string, unknown>, id: string) =>
  (view.blocks as Block[]).find((b) => b.block_id === id);

describe('asking for a temporary increase', () => {
  it('for=48h preselects the modal field; the request message shows the lease and its cost for the period', async () => {
    const view = await h.openModal('resize shop-prod 102 cores=8 ram=16 for=48h');
    const select = blockOf(view, 'lease_for')?.element as { initial_option?: { value: string } };
    expect(select.initial_option?.value).toBe('48h');
    expect(blockOf(view, 'lease_for')).toMatchObject({ optional: true });
    expect(JSON.stringify(blockOf(view, 'lease_for'))).toContain('Return to the current size after');

    const ack = await h.submitView(view, { reason: 'load test' }, USERS.dev);
    expect(ack.json).toEqual({ response_action: 'clear' });
    const request = await h.nextRequest();
    expect(request.params).toMatchObject({
      kind: 'resize',
      steps: [{ cores: 8, ramGb: 16 }],
      lease: { term: { hours: 48 }, returnTo: { cores: 4, ramGb: 8 } },
    });
    // 4 more cores at 0.0120 and 8 GB more at 0.0040 in zone-1.
    expect(request.cost?.leaseHourly).toBe('0.0800');
    const message = await h.requestMessage(request.id);
    expect(JSON.stringify(message.blocks)).toContain(
      'Temporary:* until Thu 26 Nov 14:00 UTC (2 d, counted from when it runs), then back to 4 cores / 8 GB. The increase costs EUR 3.84 for those 48 h (EUR 0.0800/h).',
    );
  });

  it('a date from the picker; a disk increase in the same request stays, and the message says so', async () => {
    const view = await h.openModal('resize shop-prod 102 cores=6 disk=150 for=2026-12-01');
    expect(
      (blockOf(view, 'lease_until')?.element as { initial_date?: string } | undefined)?.initial_date,
    ).toBe('2026-12-01');
    const ack = await h.submitView(view, {}, USERS.dev);
    expect(ack.json).toEqual({ response_action: 'clear' });
    const request = await h.nextRequest();
    expect(request.params).toMatchObject({
      lease: { term: { until: '2026-12-01T00:00:00.000Z' }, returnTo: { cores: 4 } },
    });
    expect(request.notes).toContain('The OS disk increase stays when the lease ends: a disk never shrinks.');
    const text = JSON.stringify((await h.requestMessage(request.id)).blocks);
    expect(text).toContain('Temporary:* until Tue 1 Dec 00:00 UTC, then back to 4 cores.');
  });

  it('a lease on a decrease, or on no increase of cores, RAM or CPU class, is a field error', async () => {
    const before = (await h.requests()).length;
    const down = errorsOf(
      (await h.fillAndSubmit('resize shop-prod 102 cores=2 for=48h', { confirm: ['stopped'] })).json,
    );
    expect(down).toEqual({
      lease_for: expect.stringContaining('Only an increase of cores, RAM or CPU class can be temporary'),
    });
    expect(down.lease_for).toContain('lowers cores');
    const disk = errorsOf((await h.fillAndSubmit('resize shop-prod 102 disk=300 for=7d', {})).json);
    expect(disk.lease_for).toContain('raises none of them');
    const past = errorsOf(
      (await h.fillAndSubmit('resize shop-prod 102 cores=8', { lease_until: '2026-11-20' })).json,
    );
    expect(past.lease_until).toContain('which has passed');
    const both = errorsOf(
      (await h.fillAndSubmit('resize shop-prod 102 cores=8 for=1d', { lease_until: '2026-12-20' })).json,
    );
    expect(both.lease_until).toBe('Choose a duration or a date for the return, not both.');
    expect((await h.requests()).length).toBe(before);
  });

  it('a bad for= is refused on the command line', async () => {
    const answer = await h.command('resize shop-prod 102 cores=8 for=tomorrow');
    expect(String(answer.json?.text)).toContain(
      '`for`: a lease is written as hours (48h), days (7d) or a date',
    );
  });
});

const HOUR = 3_600_000;

/** A resize asked for by the developer and approved by the lead, run to its end. */
async function approvedResize(text: string): Promise<CloudRequest> {
  const ack = await h.fillAndSubmit(text, { confirm: ['stopped'] }, USERS.dev);
  expect(ack.json).toEqual({ response_action: 'clear' });
  const created = await h.nextRequest();
  const message = await h.requestMessage(created.id);
  await h.click('approve', created.id, USERS.lead, CHANNELS.prod, message);
  return h.waitForRequest(created.id, (r) => r.state === 'succeeded', 30_000);
}

/** The thread replies of a request so far. */
async function thread(requestId: string): Promise<{ text: string; blocks?: unknown[] }[]> {
  const message = await h.requestMessage(requestId);
  return h.slack.thread(CHANNELS.prod, message.ts).map((m) => ({ text: m.text ?? '', blocks: m.blocks }));
}

/** Waits until the thread has a reply containing `part`, and returns it. */
async function replyWith(requestId: string, part: string): Promise<{ text: string; blocks?: unknown[] }> {
  const message = await h.requestMessage(requestId);
  const found = await h.slack.waitFor(
    () => h.slack.thread(CHANNELS.prod, message.ts).find((m) => (m.text ?? '').includes(part)),
    30_000,
  );
  return { text: found.text ?? '', blocks: found.blocks };
}

const count = async (requestId: string, part: string) =>
  (await thread(requestId)).filter((m) => m.text.includes(part)).length;

/** Lets the due-times loop (50 ms) look a few times at the moved clock. */
const settle = () => new Promise((r) => setTimeout(r, 400));

const buttons = (blocks: unknown[] | undefined) =>
  ((blocks ?? []) as { type: string; elements?: { action_id?: string }[] }[])
    .filter((b) => b.type === 'actions')
    .flatMap((b) => (b.elements ?? []).map((e) => e.action_id));

describe('a lease after its increase ran', () => {
  it('is stored with the size to return to; the offer comes at its end with the cost so far; the return goes through approval to one API call', async () => {
    h.clock.set(START);
    const leased = await approvedResize('resize shop-prod 102 cores=8 ram=16 for=48h');
    expect(leased).toMatchObject({
      leaseOpen: true,
      lease: { startedAt: START.toISOString(), endsAt: '2026-11-26T14:00:00.000Z' },
    });
    expect(await h.redis.zscore(dueKey(h.prefix), `lease:${leased.id}`)).toBe(
      String(START.getTime() + 48 * HOUR),
    );
    expect(
      JSON.stringify((await h.requestMessage(leased.id, (m) => (m.text ?? '').includes('Done'))).blocks),
    ).toContain('Temporary:* until Thu 26 Nov 14:00 UTC, then back to 4 cores / 8 GB.');

    h.clock.advance(47 * HOUR);
    await settle();
    expect(await count(leased.id, 'temporary increase')).toBe(0);

    h.clock.advance(HOUR);
    const offer = await replyWith(leased.id, 'The temporary increase of');
    expect(offer.text).toBe(
      `:hourglass: *The temporary increase of shop-prod / VM 102 (db-1) ended Thu 26 Nov 14:00 UTC.* Since it ran Tue 24 Nov 14:00 UTC it has cost EUR 3.84 more (48 h at EUR 0.0800/h).\nReturn to 4 cores / 8 GB (checked and approved like any request; lowering cores or RAM needs the VM stopped), or keep this size with a reason. <@${USERS.dev}> or an approver may choose.`,
    );
    console.info(`lease offer as it renders:\n${offer.text}\n${JSON.stringify(offer.blocks)}`);
    expect(buttons(offer.blocks)).toEqual(['lease_return', 'lease_keep']);

    // Return: the usual resize modal, prefilled with the lease's size and checked like any resize.
    const seen = h.slack.views.length;
    await h.click('lease_return', leased.id, USERS.dev);
    const view = (await h.openedView(seen)).view;
    expect(view.callback_id).toBe('resize');
    expect(JSON.stringify(view.blocks)).toContain(
      `Returns the temporary increase of request \`${leased.id}\`* to 4 cores / 8 GB.`,
    );
    const unstopped = await h.submitView(view, {}, USERS.dev);
    expect(unstopped.json?.response_action).toBe('errors');
    expect((unstopped.json?.errors as Record<string, string> | undefined)?.confirm).toContain(
      'needs the VM stopped',
    );
    expect((await h.submitView(view, { confirm: ['stopped'] }, USERS.dev)).json).toEqual({
      response_action: 'clear',
    });
    const back = await h.nextRequest();
    expect(back).toMatchObject({ state: 'pending', needsApproval: true, requester: USERS.dev });
    expect(back.params).toMatchObject({ returnOf: leased.id, steps: [{ cores: 4, ramGb: 8 }] });
    // The lease names its return (audited) just after the return is stored.
    await h.waitForRequest(leased.id, (r) => r.lease?.returnRequestId === back.id);

    // Still open while the return waits for its approval; the approval runs it: one API call.
    const callsBefore = h.sim.applied.filter((a) => a.vmid === 102 && a.route === 'resize').length;
    const backMessage = await h.requestMessage(back.id);
    await h.click('approve', back.id, USERS.lead2, CHANNELS.prod, backMessage);
    await h.waitForRequest(back.id, (r) => r.state === 'succeeded', 30_000);
    const ended = await h.waitForRequest(leased.id, (r) => r.leaseOpen === false);
    expect(ended.lease?.returned).toEqual({ requestId: back.id, at: expect.any(String) });
    const calls = h.sim.applied.filter((a) => a.vmid === 102 && a.route === 'resize');
    expect(calls.length - callsBefore).toBe(1);
    expect(calls[calls.length - 1]?.body).toEqual({ cores: 4, ram_gb: 8 });
    await replyWith(leased.id, `Back to 4 cores / 8 GB by request \`${back.id}\`. The lease is closed.`);
    expect(await h.redis.zscore(dueKey(h.prefix), `lease:${leased.id}`)).toBeNull();
    expect(await h.auditOf(leased.id)).toEqual(
      expect.arrayContaining([
        'lease cloudops return offered',
        `lease ${USERS.dev} return requested: ${back.id}`,
        `lease cloudops returned by request ${back.id}`,
      ]),
    );

    // No reminder after the lease ended.
    h.clock.advance(25 * HOUR);
    await settle();
    expect(await count(leased.id, 'Reminder')).toBe(0);
  });

  it('is offered no sooner than the 24-hour rule allows, and "Keep it" with a reason ends it (requester or approver only)', async () => {
    const leased = await approvedResize('resize shop-prod 104 cores=4 for=2h');
    const ranAt = new Date(leased.lease?.startedAt ?? '');
    h.clock.advance(3 * HOUR);
    await settle();
    expect(await count(leased.id, 'The temporary increase of')).toBe(0);
    h.clock.set(new Date(ranAt.getTime() + 24 * HOUR));
    const offer = await replyWith(leased.id, 'The temporary increase of');
    // Two more light cores at 0.0060 each in zone-1.
    expect(offer.text).toContain('(24 h at EUR 0.0120/h)');

    const seen = h.slack.ephemerals(CHANNELS.prod, USERS.dev2).length;
    await h.click('lease_keep', leased.id, USERS.dev2);
    await h.slack.waitFor(() => h.slack.ephemerals(CHANNELS.prod, USERS.dev2).length > seen);
    expect(h.slack.ephemerals(CHANNELS.prod, USERS.dev2).at(-1)?.text).toBe(
      'Only the requester or an approver of shop-prod can return or keep this size.',
    );

    const views = h.slack.views.length;
    await h.click('lease_keep', leased.id, USERS.lead);
    const keep = (await h.openedView(views)).view;
    expect(keep.callback_id).toBe('lease_keep');
    const empty = await h.submitView(keep, { keep_reason: '' }, USERS.lead);
    expect(empty.json).toEqual({
      response_action: 'errors',
      errors: { keep_reason: 'Say why the temporary size stays.' },
    });
    expect((await h.submitView(keep, { keep_reason: 'the sale traffic stays' }, USERS.lead)).json).toEqual({
      response_action: 'clear',
    });
    const kept = await h.waitForRequest(leased.id, (r) => r.leaseOpen === false);
    expect(kept.lease?.kept).toMatchObject({ by: USERS.lead, reason: 'the sale traffic stays' });
    await replyWith(
      leased.id,
      `Kept at this size by <@${USERS.lead}>. The lease is closed; no more reminders.\n> the sale traffic stays`,
    );
    expect(await h.auditOf(leased.id)).toContain(`lease ${USERS.lead} kept: the sale traffic stays`);
    // A late click changes nothing.
    const seenLead = h.slack.ephemerals(CHANNELS.prod, USERS.dev).length;
    await h.click('lease_return', leased.id, USERS.dev);
    await h.slack.waitFor(() => h.slack.ephemerals(CHANNELS.prod, USERS.dev).length > seenLead);
    expect(h.slack.ephemerals(CHANNELS.prod, USERS.dev).at(-1)?.text).toContain('already kept this size');
  });

  it('reminds once a day (across a restart), says when another request resized the VM, is listed by /cloud jobs, and retention keeps it', async () => {
    const leased = await approvedResize('resize shop-prod 101 ram=8 for=1d');
    const ranAt = new Date(leased.lease?.startedAt ?? '');
    h.clock.advance(HOUR);
    const other = await approvedResize('resize shop-prod 101 ram=16');
    expect(other.leaseOpen).toBeUndefined();
    // The lease ended at +24 h, but the later increase (at +1 h) allows lowering only from +25 h.
    h.clock.set(new Date(ranAt.getTime() + 24 * HOUR));
    await settle();
    expect(await count(leased.id, 'The temporary increase of')).toBe(0);
    h.clock.set(new Date(ranAt.getTime() + 25 * HOUR));
    const offer = await replyWith(leased.id, 'The temporary increase of');
    expect(offer.text).toContain(
      'Another request resized the VM since: the bot now knows 16 GB. The return still proposes 4 GB',
    );

    const jobs = await h.command('jobs');
    await h.slack.waitFor(() =>
      h.slack.responses.find((r) => JSON.stringify(r.body).includes('Open leases')),
    );
    void jobs;
    const listed = JSON.stringify(h.slack.responses.at(-1)?.body);
    expect(listed).toContain(`\`${leased.id}\` *shop-prod / VM 101 (web-1)*: :warning: *overdue*`);

    h.clock.advance(24 * HOUR);
    await replyWith(leased.id, 'Reminder 1:');
    h.clock.advance(HOUR);
    await settle();
    expect(await count(leased.id, 'Reminder')).toBe(1);

    await h.restart();
    h.clock.advance(23 * HOUR);
    await replyWith(leased.id, 'Reminder 2:');
    await settle();
    expect(await count(leased.id, 'Reminder')).toBe(2);

    // A long silence is one reminder, not one per missed day; retention removes the other request, never this one.
    h.clock.advance(100 * 24 * HOUR);
    await replyWith(leased.id, 'Reminder 3:');
    await settle();
    expect(await count(leased.id, 'Reminder')).toBe(3);
    await h.store.removeExpired();
    expect(await h.store.get(other.id)).toBeUndefined();
    expect(await h.store.get(leased.id)).toMatchObject({ leaseOpen: true });
  });
});

describe('"Keep it" while a return is asked for', () => {
  /** A lease on VM 102 offered for return, and its return request made by the developer, waiting for approval. */
  async function leaseWithReturn(text: string): Promise<{ leased: CloudRequest; back: CloudRequest }> {
    const leased = await approvedResize(text);
    h.clock.set(new Date(new Date(leased.lease?.startedAt ?? '').getTime() + 25 * HOUR));
    await replyWith(leased.id, 'The temporary increase of');
    const seen = h.slack.views.length;
    await h.click('lease_return', leased.id, USERS.dev);
    const view = (await h.openedView(seen)).view;
    expect((await h.submitView(view, { confirm: ['stopped'] }, USERS.dev)).json).toEqual({
      response_action: 'clear',
    });
    const back = await h.nextRequest();
    await h.waitForRequest(leased.id, (r) => r.lease?.returnRequestId === back.id);
    return { leased, back };
  }

  /** Submits the Keep form as `user`; the form's answer. */
  async function keep(leaseId: string, user: string, reason: string) {
    const views = h.slack.views.length;
    await h.click('lease_keep', leaseId, user);
    return h.submitView((await h.openedView(views)).view, { keep_reason: reason }, user);
  }

  it('withdraws the waiting return (no live buttons, audited): a lease ends by Keep or by its return, never both', async () => {
    const { leased, back } = await leaseWithReturn('resize shop-prod 102 cores=6 for=1d');
    const calls = () => h.sim.applied.filter((a) => a.vmid === 102 && a.route === 'resize').length;
    const callsBefore = calls();
    expect((await keep(leased.id, USERS.lead, 'the traffic stays')).json).toEqual({
      response_action: 'clear',
    });

    const withdrawn = await h.waitForRequest(back.id, (r) => r.state === 'cancelled');
    expect(withdrawn.cancelledBy).toBe(USERS.lead);
    const kept = await h.waitForRequest(leased.id, (r) => r.leaseOpen === false);
    expect(kept.lease?.kept).toMatchObject({ by: USERS.lead, reason: 'the traffic stays' });
    expect(kept.lease?.returned).toBeUndefined();
    // The return's message loses its buttons; an approval clicked late changes nothing and sends nothing.
    const backMessage = await h.requestMessage(
      back.id,
      (m) => !JSON.stringify(m.blocks).includes('"approve"'),
    );
    const seen = h.slack.ephemerals(CHANNELS.prod, USERS.lead2).length;
    await h.click('approve', back.id, USERS.lead2, CHANNELS.prod, backMessage);
    await h.slack.waitFor(() => h.slack.ephemerals(CHANNELS.prod, USERS.lead2).length > seen);
    expect(h.slack.ephemerals(CHANNELS.prod, USERS.lead2).at(-1)?.text).toContain('Nothing changed');
    await settle();
    expect(calls()).toBe(callsBefore);
    expect((await h.waitForRequest(back.id, () => true)).state).toBe('cancelled');
    expect(await h.auditOf(back.id)).toContain(
      `cancelled ${USERS.lead} withdrawn: the lease of request ${leased.id} was kept`,
    );
    expect(await h.auditOf(leased.id)).toContain(`lease ${USERS.lead} kept: the traffic stays`);
  });

  it('is refused while the return is already being sent; the lease then ends by that return', async () => {
    const { leased, back } = await leaseWithReturn('resize shop-prod 102 cores=8 for=1d');
    h.sim.fault('resize', { kind: 'latency', ms: 3000 });
    await h.click('approve', back.id, USERS.lead2, CHANNELS.prod, await h.requestMessage(back.id));
    await h.waitForRequest(back.id, (r) => r.state === 'sending', 30_000);
    const refused = await keep(leased.id, USERS.lead, 'the traffic stays');
    expect(refused.json).toEqual({
      response_action: 'errors',
      errors: {
        keep_reason: `The return to the previous size is already under way (request \`${back.id}\`): the lease ends when it succeeds, or stays open if it fails.`,
      },
    });
    await h.waitForRequest(back.id, (r) => r.state === 'succeeded', 30_000);
    const ended = await h.waitForRequest(leased.id, (r) => r.leaseOpen === false);
    expect(ended.lease?.returned).toMatchObject({ requestId: back.id });
    expect(ended.lease?.kept).toBeUndefined();
  });

  it('a return whose lease was kept before the lease named it is not sent when it runs', async () => {
    const { leased, back } = await leaseWithReturn('resize shop-prod 102 cores=10 for=1d');
    // Keep landing in the moment between the return's creation and the lease naming it: the lease is kept, and
    // the return it did not know of is still waiting (what the race leaves behind, written as it would be).
    await h.store.note(leased.id, { note: 'lease', actor: USERS.lead, detail: 'kept: race' }, (current) =>
      current.lease
        ? {
            leaseOpen: false,
            lease: {
              ...current.lease,
              returnRequestId: undefined,
              kept: { by: USERS.lead, reason: 'race', at: new Date().toISOString() },
            },
          }
        : undefined,
    );
    const calls = () => h.sim.applied.filter((a) => a.vmid === 102 && a.route === 'resize').length;
    const callsBefore = calls();
    await h.click('approve', back.id, USERS.lead2, CHANNELS.prod, await h.requestMessage(back.id));
    const ended = await h.waitForRequest(back.id, (r) => r.state === 'refused', 30_000);
    expect(calls()).toBe(callsBefore);
    expect(JSON.stringify(ended)).toContain(`the temporary size of request ${leased.id} was kept meanwhile`);
    expect((await h.store.get(leased.id))?.lease?.returned).toBeUndefined();
  });
});
