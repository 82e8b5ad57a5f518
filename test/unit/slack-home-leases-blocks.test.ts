import { describe, expect, it } from 'vitest';
import { SlackChecks } from '../../sim/slack/checks.ts';
import { INBOX_LIMITS, type Inbox, LEASES_SHOWN } from '../../src/requests/inbox.ts';
import type { CloudRequest, NewRequest } from '../../src/requests/model/types.ts';
import { homeView } from '../../src/slack/blocks/home.ts';
import { resizeRequest, restoreRequest } from '../fixtures/requests.ts';

// The App Home's open leases (issue 13): the lease offer's buttons, and the 100-block limit kept with every list full.
const checks = new SlackChecks();
const at = new Date('2026-11-25T10:00:00Z');
const long = 'x'.repeat(2000);

function stored(input: NewRequest, i: number, patch: Partial<CloudRequest> = {}): CloudRequest {
  return {
    ...input,
    id: `R${String(i).padStart(7, '0')}`,
    version: 1,
    createdAt: at.toISOString(),
    updatedAt: at.toISOString(),
    nextStep: 0,
    outcomes: [],
    ...patch,
  } as CloudRequest;
}

/** An open lease on VM 102 that ends `hours` from `at`. */
function lease(i: number, hours: number, vmName?: string): CloudRequest {
  const input = resizeRequest({ vmid: 102, vmName, target: { cores: 8 }, channel: `C0CHAN${i % 3}` });
  if (input.params.kind === 'resize') input.params.lease = { term: { hours: 48 }, returnTo: { cores: 4 } };
  return stored(input, 300 + i, {
    state: 'succeeded',
    leaseOpen: true,
    lease: {
      startedAt: new Date(at.getTime() - 3_600_000).toISOString(),
      endsAt: new Date(at.getTime() + hours * 3_600_000).toISOString(),
    },
    cost: { cluster: 'zone-1', currency: 'EUR', hourly: '0.1', monthly: '73.00', leaseHourly: '0.0480' },
  });
}

const empty: Inbox = {
  user: 'U0DEV',
  waiting: [],
  moreWaiting: { count: 0, channels: [] },
  mine: [],
  scheduled: [],
  moreScheduled: 0,
};

const buttonsOf = (blocks: unknown[]) =>
  (blocks as { type: string; block_id?: string; elements?: { action_id: string; value: string }[] }[])
    .filter((b) => b.type === 'actions')
    .map((b) => ({ block: b.block_id, buttons: (b.elements ?? []).map((e) => `${e.action_id}:${e.value}`) }));

describe('homeView with open leases', () => {
  it('lists each lease with its end and the offer’s Return / Keep buttons, and passes home_view', () => {
    const view = homeView({ ...empty, leases: [lease(1, -2), lease(2, 30)] }, at);
    expect(checks.checkView(view)).toEqual([]);
    const text = JSON.stringify(view.blocks);
    expect(text).toContain('Temporary sizes you may return or keep* (2, the earliest end first)');
    expect(text).toContain('`R0000301` *shop-prod / VM 102*: :warning: *overdue* since');
    expect(text).toContain('`R0000302` *shop-prod / VM 102*: until');
    expect(text).toContain('then back to 4 cores');
    expect(buttonsOf(view.blocks)).toEqual([
      { block: 'lease:R0000301', buttons: ['lease_return:R0000301', 'lease_keep:R0000301'] },
      { block: 'lease:R0000302', buttons: ['lease_return:R0000302', 'lease_keep:R0000302'] },
    ]);
  });

  it('every list full, long names and many leases: within 100 blocks, passes home_view, the rest counted', () => {
    const inbox: Inbox = {
      user: 'U0LEAD',
      waiting: Array.from({ length: INBOX_LIMITS.waiting }, (_, i) =>
        stored(resizeRequest({ vmName: long, reason: long }), i),
      ),
      moreWaiting: { count: 500, channels: ['C0CHAN1'] },
      mine: Array.from({ length: INBOX_LIMITS.mine }, (_, i) =>
        stored(restoreRequest({ vmName: long }), 100 + i, { state: i % 2 ? 'pending' : 'succeeded' }),
      ),
      scheduled: Array.from({ length: INBOX_LIMITS.scheduled }, (_, i) =>
        stored(resizeRequest({ vmName: long }), 200 + i, { state: 'queued', runAt: at.toISOString() }),
      ),
      moreScheduled: 7,
      leases: Array.from({ length: LEASES_SHOWN }, (_, i) => lease(i, i, long)),
      moreLeases: { count: 40, channels: ['C0CHAN9'] },
    };
    const digests = Array.from({ length: 60 }, (_, i) => ({ channel: `C0CHAN${i}`, label: long, next: at }));
    const view = homeView(inbox, at, digests);
    expect(view.blocks.length).toBeLessThanOrEqual(100);
    expect(checks.checkView(view)).toEqual([]);
    const shown = buttonsOf(view.blocks).filter((b) => b.block?.startsWith('lease:')).length;
    expect(shown).toBeGreaterThanOrEqual(1);
    const text = JSON.stringify(view.blocks);
    expect(text).toContain(`(${LEASES_SHOWN + 40}, the earliest end first)`);
    expect(text).toContain(`and ${LEASES_SHOWN + 40 - shown} more: \`/cloud jobs\` in`);
    expect(text).toContain('<#C0CHAN9>');
    // The 30 waiting requests keep their place.
    expect(buttonsOf(view.blocks).filter((b) => b.block?.startsWith('home:'))).toHaveLength(30);
  });

  it('with room, all the leases the inbox carries are shown', () => {
    const view = homeView(
      { ...empty, leases: Array.from({ length: LEASES_SHOWN }, (_, i) => lease(i, i)) },
      at,
    );
    expect(buttonsOf(view.blocks).filter((b) => b.block?.startsWith('lease:'))).toHaveLength(LEASES_SHOWN);
    expect(JSON.stringify(view.blocks)).not.toContain('more: `/cloud jobs`');
  });
});
