import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { CHANNELS, type Harness, startHarness, USERS } from '../helpers/harness.ts';
import { clickOnHome, homeAfter, homeButtons, openHome } from '../helpers/slack-events.ts';

// Open leases on the App Home (issue 13): each person sees the temporary sizes they may return or keep, with when
// each ends and the lease offer's own buttons, which act exactly as in the thread. The whole bot, one moved clock.
const START = new Date('2026-11-24T14:00:00Z');
const HOUR = 3_600_000;

let h: Harness;
beforeAll(async () => {
  h = await startHarness({
    role: 'all',
    now: START,
    startOptions: { duePolicy: { pollMs: 50, leaseMs: 60_000, batch: 50 } },
  });
});
afterEach(() => {
  expect(h.slack.problems).toEqual([]);
});
afterAll(async () => {
  const publishes = h.slack.callsOf('views.publish');
  console.info(`slack-home-leases: ${publishes.length} views.publish calls, all checked against home_view`);
  await h?.close();
});

/** A resize asked for by the developer and approved by the lead, run to its end. */
async function approvedResize(text: string): Promise<CloudRequest> {
  const ack = await h.fillAndSubmit(text, { confirm: ['stopped'] }, USERS.dev);
  expect(ack.json).toEqual({ response_action: 'clear' });
  const created = await h.nextRequest();
  const message = await h.requestMessage(created.id);
  await h.click('approve', created.id, USERS.lead, CHANNELS.prod, message);
  return h.waitForRequest(created.id, (r) => r.state === 'succeeded' && r.leaseOpen === true, 30_000);
}

/** `user` opens their Home tab; the home it publishes. */
async function home(user: string) {
  const seen = h.slack.homes.length;
  expect((await openHome(h, user)).status).toBe(200);
  return homeAfter(h, user, seen);
}

const leaseButtons = (blocks: Record<string, unknown>[], id: string) =>
  homeButtons(blocks).filter((b) => b.value === id && b.action.startsWith('lease_'));

/** The text of the modal the bot opened after `seen` views. */
const modalAfter = async (seen: number) => (await h.openedView(seen)).view;

describe('App Home: open leases', () => {
  let leased: CloudRequest;

  it('the requester’s home lists their open lease with its end and Return / Keep; an approver’s too; nobody else’s', async () => {
    leased = await approvedResize('resize shop-prod 102 cores=8 ram=16 for=48h');
    const dev = await home(USERS.dev);
    console.info(`App Home of the requester as it renders:\n${dev.text}`);
    expect(dev.text).toContain('Temporary sizes you may return or keep* (1, the earliest end first)');
    expect(dev.text).toContain(
      `\`${leased.id}\` *shop-prod / VM 102 (db-1)*: until Thu 26 Nov 14:00 UTC, then back to 4 cores / 8 GB`,
    );
    expect(leaseButtons(dev.blocks, leased.id)).toEqual([
      { action: 'lease_return', value: leased.id },
      { action: 'lease_keep', value: leased.id },
    ]);
    expect(leaseButtons((await home(USERS.lead)).blocks, leased.id)).toHaveLength(2);
    expect((await home(USERS.dev2)).text).not.toContain(leased.id);
  });

  it('Return from the home opens the thread’s prefilled resize form; its submission asks for the return', async () => {
    h.clock.advance(48 * HOUR);
    const seen = h.slack.views.length;
    await clickOnHome(h, 'lease_return', leased.id, USERS.dev);
    const view = await modalAfter(seen);
    expect(view.callback_id).toBe('resize');
    expect(JSON.stringify(view.blocks)).toContain(
      `Returns the temporary increase of request \`${leased.id}\`* to 4 cores / 8 GB.`,
    );
    expect((await h.submitView(view, { confirm: ['stopped'] }, USERS.dev)).json).toEqual({
      response_action: 'clear',
    });
    const back = await h.nextRequest();
    expect(back).toMatchObject({ state: 'pending', requester: USERS.dev });
    expect(back.params).toMatchObject({ returnOf: leased.id, steps: [{ cores: 4, ramGb: 8 }] });
    await h.waitForRequest(leased.id, (r) => r.lease?.returnRequestId === back.id);
    expect(await h.auditOf(leased.id)).toContain(`lease ${USERS.dev} return requested: ${back.id}`);
    const dev = await home(USERS.dev);
    expect(dev.text).toContain(`\`${leased.id}\` *shop-prod / VM 102 (db-1)*: :warning: *overdue* since`);
    expect(dev.text).toContain(`return requested: \`${back.id}\``);
    // A second Return while that one waits is answered in a modal, as in the thread.
    const again = h.slack.views.length;
    await clickOnHome(h, 'lease_return', leased.id, USERS.dev);
    expect(JSON.stringify((await modalAfter(again)).blocks)).toContain(
      `A return is already under way: request \`${back.id}\`.`,
    );
  });

  it('Keep from the home asks for a reason and ends the lease, audited; someone not involved is refused', async () => {
    const kept = await approvedResize('resize shop-prod 104 cores=4 for=2h');
    let seen = h.slack.views.length;
    await clickOnHome(h, 'lease_keep', kept.id, USERS.dev2);
    expect(JSON.stringify((await modalAfter(seen)).blocks)).toContain(
      'Only the requester or an approver of shop-prod can return or keep this size.',
    );
    const lead = await home(USERS.lead);
    expect(leaseButtons(lead.blocks, kept.id)).toHaveLength(2);
    seen = h.slack.views.length;
    await clickOnHome(h, 'lease_keep', kept.id, USERS.lead);
    const modal = await modalAfter(seen);
    expect(modal.callback_id).toBe('lease_keep');
    expect((await h.submitView(modal, { keep_reason: 'traffic stays' }, USERS.lead)).json).toEqual({
      response_action: 'clear',
    });
    const closed = await h.waitForRequest(kept.id, (r) => r.leaseOpen === false);
    expect(closed.lease?.kept).toMatchObject({ by: USERS.lead, reason: 'traffic stays' });
    expect(await h.auditOf(kept.id)).toContain(`lease ${USERS.lead} kept: traffic stays`);
    expect(leaseButtons((await home(USERS.lead)).blocks, kept.id)).toEqual([]);
    expect(leaseButtons((await home(USERS.dev)).blocks, kept.id)).toEqual([]);
  });

  it('many open leases and a full approval list: the home passes home_view within 100 blocks, the rest counted', async () => {
    for (let i = 0; i < 11; i++) await approvedResize(`resize shop-prod 101 cores=${3 + i} for=7d`);
    for (let i = 0; i < 32; i++) {
      const ack = await h.fillAndSubmit(`resize shop-prod 103 ram=${9 + i}`, {}, USERS.dev2);
      expect(ack.json).toEqual({ response_action: 'clear' });
    }
    const open = (await h.store.openLeases()).filter((r) => r.leaseOpen);
    expect(open).toHaveLength(12);
    const lead = await home(USERS.lead);
    expect(lead.blocks.length).toBeLessThanOrEqual(100);
    expect(homeButtons(lead.blocks).filter((b) => b.action === 'approve')).toHaveLength(30);
    const shown = homeButtons(lead.blocks).filter((b) => b.action === 'lease_keep').length;
    expect(shown).toBeGreaterThanOrEqual(1);
    expect(lead.text).toContain('Temporary sizes you may return or keep* (12, the earliest end first)');
    expect(lead.text).toContain(`and ${12 - shown} more: \`/cloud jobs\` in <#${CHANNELS.prod}> lists them.`);
    console.info(
      `App Home of an approver with 12 open leases and 33 waiting: ${lead.blocks.length} blocks, ${shown} leases shown`,
    );
  });
});
