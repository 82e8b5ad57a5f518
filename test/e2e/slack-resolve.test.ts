import { describe, expect, it } from 'vitest';
import { botPerFile } from '../helpers/bot-per-file.ts';
import { CHANNELS, PROD_UUID, USERS } from '../helpers/harness.ts';

// The whole bot (ROLE=all) on the sims: an unknown outcome resolved through the thread's button.
const h = botPerFile({ role: 'all' });

const fieldErrors = (json: Record<string, unknown> | undefined) =>
  json?.response_action === 'errors' ? (json.errors as Record<string, string>) : {};

describe('"it was applied" records the change like a success (issue 17.8)', () => {
  it('after disk 100→110 and cores 4→6 resolved as applied: the modal shows them, a shrink to 105 and lowering cores within 24 h are refused', async () => {
    // VM 102: 4 cores, 8 GB RAM, 100 GB disk in the policy. The API applies the change, then the connection drops.
    h.sim.fault('resize', { kind: 'drop', afterApply: true, times: 1 });
    await h.fillAndSubmit('resize shop-prod 102 cores=6 disk=110', { reason: 'growth' });
    const request = await h.nextRequest();
    const message = await h.requestMessage(request.id);
    await h.click('approve', request.id, USERS.lead, CHANNELS.prod, message);
    const unknown = await h.waitForRequest(request.id, (r) => r.state === 'unknown', 30_000);
    expect(h.sim.vm(PROD_UUID, 102)).toMatchObject({ cores: 6 });
    const reply = await h.slack.waitFor(() =>
      h.slack
        .thread(CHANNELS.prod, message.ts)
        .find((m) => (m.text ?? '').startsWith(':warning: Outcome unknown')),
    );

    // Before the resolution the bot still knows the old size.
    const before = JSON.stringify(await h.openModal('resize shop-prod 102'));
    expect(before).toContain('4 cores');
    expect(before).toContain('100 GB disk');

    await h.click('resolve_done', request.id, USERS.dev, CHANNELS.prod, { ts: reply.ts, text: reply.text });
    await h.waitForRequest(request.id, (r) => r.state === 'resolved_done');

    const after = JSON.stringify(await h.openModal('resize shop-prod 102'));
    expect(after).toContain('6 cores');
    expect(after).toContain('110 GB disk');
    expect(after).toContain('Last increase');

    // The OS disk never shrinks below what is now known.
    const shrink = await h.fillAndSubmit('resize shop-prod 102 disk=105', {});
    expect(fieldErrors(shrink.json).os_disk_gb).toMatch(/110/);
    // Lowering cores waits 24 hours from the increase: from when the bot stopped waiting for the API's answer.
    const increasedAt = new Date(unknown.outcomes.at(-1)?.at ?? '');
    const lower = await h.fillAndSubmit('resize shop-prod 102 cores=4', { confirm: ['stopped'] });
    // Refused only by the 24-hour rule: the bot offers to schedule it for when it is allowed.
    expect(lower.json?.response_action).toBe('push');
    const offer = JSON.stringify(lower.json?.view);
    expect(offer).toContain('"callback_id":"resize_schedule"');
    expect(offer).toContain('within 24 hours');
    const from = /Cores can be lowered from (\d{4}-\d\d-\d\d \d\d:\d\d) UTC/.exec(offer)?.[1];
    const early =
      new Date(`${from?.replace(' ', 'T')}:00Z`).getTime() - (increasedAt.getTime() + 24 * 3_600_000);
    // Shown to the minute, rounded up.
    expect(early).toBeGreaterThanOrEqual(0);
    expect(early).toBeLessThanOrEqual(60_000);
    h.clock.set(new Date(increasedAt.getTime() + 24 * 3_600_000 + 60_000));
    const later = await h.fillAndSubmit('resize shop-prod 102 cores=4', { confirm: ['stopped'] });
    expect(later.json).toEqual({ response_action: 'clear' });
    // Nothing was sent again.
    expect(h.sim.applied.filter((a) => a.vmid === 102)).toHaveLength(1);
  });
});
