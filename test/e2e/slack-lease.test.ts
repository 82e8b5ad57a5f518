import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness, USERS } from '../helpers/harness.ts';

// Temporary increases (PRODUCT.md §2 "Temporary changes (leases)") through the whole bot: signed HTTP in, the
// cloud sim and the Slack stand-in out, one shared clock the test moves.
const START = new Date('2026-11-24T14:00:00Z');

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ role: 'all', now: START });
});
afterEach(() => {
  expect(h.slack.problems).toEqual([]);
});
afterAll(async () => {
  await h?.close();
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
