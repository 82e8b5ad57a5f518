import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditLog, exportAudit } from '../../src/requests/audit/audit.ts';
import { readStoredChain } from '../../src/requests/audit/read.ts';
import { verifyChain } from '../../src/requests/audit/verify.ts';
import { requestKeys } from '../../src/requests/store/keys.ts';
import { CHANNELS, defaultPolicyYaml, type Harness, startHarness, USERS } from '../helpers/harness.ts';

const DAY = 86_400_000;

// The whole bot (ROLE=all) with retention_days: 30, audit_retention_days: 45 and a retention sweep every 100 ms; the
// test moves the clock.
let h: Harness;
beforeAll(async () => {
  h = await startHarness({
    role: 'all',
    policyYaml: (start) => `retention_days: 30\naudit_retention_days: 45\n${defaultPolicyYaml(start)}`,
    startOptions: { retentionPolicy: { intervalMs: 100, batch: 500, finishedJobAgeMs: DAY } },
  });
});
afterAll(async () => {
  await h?.close();
});

/** Polls `check` until it holds, for up to 30 s. */
async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`still not so after 30 s: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Waits until the bot's retention sweep has run at least once more. */
const aFewSweeps = () => new Promise((resolve) => setTimeout(resolve, 400));

describe('retention in the running bot', () => {
  it('removes requests retention_days after they end, never while a lease is open; audit entries follow their own retention', async () => {
    const audit = new AuditLog(h.redis, h.prefix);

    // One request runs to success; one is cancelled by its requester (its expire job goes with the decision).
    await h.fillAndSubmit('resize shop-prod 102 cores=6', {});
    const done = await h.nextRequest();
    const doneMessage = await h.requestMessage(done.id);
    await h.click('approve', done.id, USERS.lead, CHANNELS.prod, doneMessage);
    await h.waitForRequest(done.id, (r) => r.state === 'succeeded', 30_000);

    await h.fillAndSubmit('resize shop-prod 101 disk=60', {});
    const cancelled = await h.nextRequest();
    const cancelMessage = await h.requestMessage(cancelled.id);
    // The expiry is queued right after the message's post: the message can be in Slack a moment before it.
    await until(
      async () => (await h.queues.notify.getJob(`expire.${cancelled.id}`)) !== undefined,
      'the expire job queued',
    );
    await h.click('cancel', cancelled.id, USERS.dev, CHANNELS.prod, cancelMessage);
    await h.waitForRequest(cancelled.id, (r) => r.state === 'cancelled');
    expect(await h.queues.notify.getJob(`expire.${cancelled.id}`)).toBeUndefined();
    expect(await h.queues.notify.getJob(`expire.${done.id}`)).toBeUndefined();

    // A lease (set as the lease feature will) holds the succeeded request.
    await h.store.update(done.id, { leaseOpen: true });

    h.clock.advance(29 * DAY);
    await aFewSweeps();
    expect(await h.store.get(cancelled.id)).toBeDefined();

    h.clock.advance(2 * DAY);
    await until(async () => (await h.store.get(cancelled.id)) === undefined, 'cancelled request removed');
    expect((await h.requests()).map((r) => r.id)).toEqual([done.id]);
    expect(await h.store.get(done.id)).toBeDefined();
    expect(await audit.read({ requestId: done.id })).not.toEqual([]);
    // The removed request's history stays in the audit until audit_retention_days.
    expect(await audit.read({ requestId: cancelled.id })).not.toEqual([]);

    // The lease ends: retention counts from then.
    await h.store.update(done.id, { leaseOpen: false });
    h.clock.advance(29 * DAY);
    await aFewSweeps();
    expect(await h.store.get(done.id)).toBeDefined();
    h.clock.advance(2 * DAY);
    await until(async () => (await h.store.get(done.id)) === undefined, 'succeeded request removed');
    await until(async () => (await h.redis.xlen(requestKeys(h.prefix).audit)) === 0, 'audit trimmed');
    expect(await h.requests()).toEqual([]);
    expect(await audit.read({ requestId: cancelled.id })).toEqual([]);
    const chain = await readStoredChain(h.redis, h.prefix);
    expect(verifyChain(chain.records, { head: chain.head, anchor: chain.anchor })).toMatchObject({
      ok: true,
    });
  });

  it('trims audit entries from the oldest audit_retention_days after they were written, and what remains verifies', async () => {
    /** The request ids the whole audit stream (what `cloudops audit` exports) still names. */
    const exported = async () => {
      const ids = new Set<string>();
      for await (const entry of exportAudit(h.redis, h.prefix)) ids.add(entry.requestId);
      return ids;
    };
    await h.fillAndSubmit('resize shop-prod 102 cores=8', {});
    const rejected = await h.nextRequest();
    const seen = h.slack.views.length;
    await h.click('reject', rejected.id, USERS.lead2, CHANNELS.prod, await h.requestMessage(rejected.id));
    await h.submitView((await h.openedView(seen)).view, { reject_reason: 'not now' }, USERS.lead2);
    await h.waitForRequest(rejected.id, (r) => r.state === 'rejected');

    h.clock.advance(31 * DAY);
    await until(async () => (await h.store.get(rejected.id)) === undefined, 'rejected request removed');
    expect(await exported()).toContain(rejected.id);
    // A later request: its entries are newer than the window when the older ones go.
    await h.fillAndSubmit('resize shop-prod 101 disk=60', {});
    const later = await h.nextRequest();
    h.clock.advance(15 * DAY);
    await until(async () => !(await exported()).has(rejected.id), 'its audit entries removed');
    expect(await exported()).toContain(later.id);
    const chain = await readStoredChain(h.redis, h.prefix);
    expect(chain.anchor).toBeDefined();
    expect(verifyChain(chain.records, { head: chain.head, anchor: chain.anchor })).toMatchObject({
      ok: true,
    });
  });
});
