import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAST_SWEEP_POLICY } from '../../src/jobs/stranded-sweeper.ts';
import { resizeRequest } from '../fixtures/requests.ts';
import { CHANNELS, type Harness, PROD_UUID, startHarness, USERS } from '../helpers/harness.ts';

// The running bot (ROLE=all) sweeps for requests stranded between two writes and runs them.
let h: Harness;
beforeAll(async () => {
  h = await startHarness({ role: 'all', startOptions: { sweepPolicy: FAST_SWEEP_POLICY } });
});
afterAll(async () => {
  await h?.close();
});

describe('the stranded-request sweeper in the running bot', () => {
  it('an approval stored without its queue job (a crash between the two writes) still runs, once', async () => {
    const created = await h.store.create(
      resizeRequest({
        channel: CHANNELS.prod,
        projectUuid: PROD_UUID,
        vmid: 102,
        target: { cores: 6 },
        requester: USERS.dev,
        approvers: [USERS.lead],
      }),
      USERS.dev,
    );
    // What the approve handler stores before it enqueues; the enqueue never happens.
    const approved = await h.store.transition(created.id, {
      from: ['pending'],
      to: 'approved',
      actor: USERS.lead,
      patch: { approvedBy: USERS.lead },
    });
    expect(approved.ok).toBe(true);

    const done = await h.waitForRequest(created.id, (r) => r.state === 'succeeded', 15_000);
    expect(done.approvedBy).toBe(USERS.lead);
    expect(h.sim.applied.filter((a) => a.vmid === 102)).toHaveLength(1);
    expect(h.sim.vm(PROD_UUID, 102).cores).toBe(6);
  });
});
