import { describe, expect, it } from 'vitest';
import { SlackChecks } from '../../sim/slack/checks.ts';
import { INBOX_LIMITS, type Inbox } from '../../src/requests/inbox.ts';
import type { CloudRequest, NewRequest } from '../../src/requests/model/types.ts';
import { homeView, noticeModal } from '../../src/slack/blocks/home.ts';
import { resizeRequest, restoreRequest } from '../fixtures/requests.ts';

const checks = new SlackChecks();
const at = new Date('2026-11-25T10:00:00Z');

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

const long = 'x'.repeat(2000);

describe('homeView', () => {
  it('an empty home passes home_view and says nothing waits', () => {
    const view = homeView(
      {
        user: 'U0LEAD',
        waiting: [],
        moreWaiting: { count: 0, channels: [] },
        mine: [],
        scheduled: [],
        moreScheduled: 0,
      },
      at,
    );
    expect(checks.checkView(view)).toEqual([]);
    expect(JSON.stringify(view)).toContain('Nothing is waiting for you.');
  });

  it('full lists with long names stay within 100 blocks and pass home_view', () => {
    const inbox: Inbox = {
      user: 'U0LEAD',
      waiting: Array.from({ length: INBOX_LIMITS.waiting }, (_, i) =>
        stored(resizeRequest({ vmName: long, reason: long }), i, {
          cost: {
            cluster: 'zone-1',
            currency: 'EUR',
            hourly: '0.1',
            monthly: '73.00',
            diffHourly: '0.01',
            diffMonthly: '7.30',
          },
        }),
      ),
      moreWaiting: { count: 500, channels: Array.from({ length: 40 }, (_, i) => `C0CHAN${i}`) },
      mine: Array.from({ length: INBOX_LIMITS.mine }, (_, i) =>
        stored(restoreRequest({ vmName: long }), 100 + i, { state: i % 2 ? 'pending' : 'succeeded' }),
      ),
      scheduled: Array.from({ length: INBOX_LIMITS.scheduled }, (_, i) =>
        stored(resizeRequest({ vmName: long }), 200 + i, { state: 'queued', runAt: at.toISOString() }),
      ),
      moreScheduled: 7,
    };
    const digests = Array.from({ length: 60 }, (_, i) => ({
      channel: `C0CHAN${i}`,
      label: `daily 09:00 Europe/Berlin ${long}`,
      next: at,
    }));
    const view = homeView(inbox, at, digests);
    expect(view.blocks.length).toBeLessThanOrEqual(100);
    expect(checks.checkView(view)).toEqual([]);
    const text = JSON.stringify(view);
    expect(text).toContain('and 500 more waiting for you');
    expect(text).toContain('and 7 more, later');
  });

  it('the notice modal for a refused click passes modal_view', () => {
    expect(checks.checkView(noticeModal('Only the approvers of shop-prod can approve.'))).toEqual([]);
  });
});
