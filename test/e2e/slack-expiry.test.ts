import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANNELS, defaultPolicyYaml, type Harness, startHarness } from '../helpers/harness.ts';

// Expiry with nobody clicking: the delayed expire job alone must take the buttons away (ROLE=all runs it).
let h: Harness;
beforeAll(async () => {
  h = await startHarness({
    role: 'all',
    // 0.0005 h = 1.8 s: the expire job is due shortly after the request is made.
    policyYaml: (start) =>
      defaultPolicyYaml(start).replace('approval_ttl_hours: 24', 'approval_ttl_hours: 0.0005'),
  });
});
afterAll(async () => {
  await h?.close();
});

type Block = { type: string; elements?: { action_id?: string }[] };
const buttonsOf = (blocks: unknown[] | undefined) =>
  ((blocks ?? []) as Block[])
    .filter((b) => b.type === 'actions')
    .flatMap((b) => (b.elements ?? []).map((e) => e.action_id));

describe('expiry without a click', () => {
  it('a pending request expires at its time: state, message without buttons, a reply in its thread', async () => {
    expect(h.policy.approval_ttl_hours).toBe(0.0005);
    await h.fillAndSubmit('resize shop-prod 104 ram=4', {});
    const request = await h.nextRequest();
    const message = await h.requestMessage(request.id);
    expect(buttonsOf(message.blocks)).toContain('approve');
    h.clock.advance(60_000);

    const expired = await h.waitForRequest(request.id, (r) => r.state === 'expired', 30_000);
    expect(expired.approvedBy).toBeUndefined();
    const updated = await h.requestMessage(request.id, (m) => (m.text ?? '').includes('Expired'));
    expect(buttonsOf(updated.blocks)).toEqual([]);
    await h.slack.waitFor(
      () =>
        h.slack.thread(CHANNELS.prod, message.ts).find((m) => (m.text ?? '').startsWith('Expired without')),
      30_000,
    );
    expect(h.sim.calls.filter((c) => c.method === 'POST')).toHaveLength(0);
    expect(h.slack.problems).toEqual([]);
  });
});
