import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAST_SWEEP_POLICY } from '../../src/jobs/stranded-sweeper.ts';
import { resizeRequest } from '../fixtures/requests.ts';
import { CHANNELS, type Harness, PROD_UUID, startHarness, USERS } from '../helpers/harness.ts';
import { approveSealed } from '../helpers/seal.ts';

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
        // What the policy says of VM 102: the worker checks the request against it again before it sends.
        before: {
          vmid: 102,
          ha: false,
          cores: 4,
          ramGb: 8,
          osDiskGb: 100,
          cpuClass: 'regular',
          wanMode: 'ipv4',
        },
        requester: USERS.dev,
        approvers: [USERS.lead],
      }),
      USERS.dev,
    );
    // What the approve handler stores (the sealed approval) before it enqueues; the enqueue never happens.
    const approved = await approveSealed(h.store, created, USERS.lead, { queue: false });
    expect(approved.state).toBe('approved');

    const done = await h.waitForRequest(created.id, (r) => r.state === 'succeeded', 30_000);
    expect(done.approvedBy).toBe(USERS.lead);
    expect(h.sim.applied.filter((a) => a.vmid === 102)).toHaveLength(1);
    expect(h.sim.vm(PROD_UUID, 102).cores).toBe(6);
  });

  it('a process killed right after storing an approval: the sweeper queues it, posts "Approved" and the buttons go', async () => {
    const ack = await h.fillAndSubmit('resize shop-prod 101 disk=60', {});
    expect(ack.json).toEqual({ response_action: 'clear' });
    let request = await h.nextRequest();
    // The request of the test before was made without the modal: skip it.
    while (request.vmid !== 101) request = await h.nextRequest();
    const message = await h.requestMessage(request.id);
    expect(JSON.stringify(message.blocks)).toContain('"action_id":"approve"');
    // What the approve click stores first (sealed); the process dies before it queues or announces anything.
    const approved = await approveSealed(h.store, request, USERS.lead, { queue: false });
    expect(approved.state).toBe('approved');

    await h.waitForRequest(request.id, (r) => r.state === 'succeeded', 30_000);
    const thread = await h.slack.waitFor(() => {
      const replies = h.slack.thread(CHANNELS.prod, message.ts).map((m) => m.text ?? '');
      return replies.some((t) => t.startsWith(':white_check_mark: Done')) &&
        replies.some((t) => t.startsWith('Approved by'))
        ? replies
        : undefined;
    }, 30_000);
    expect(thread.filter((t) => t.startsWith(`Approved by <@${USERS.lead}>`))).toHaveLength(1);
    const final = await h.requestMessage(request.id, (m) => (m.text ?? '').includes('Done'));
    expect(JSON.stringify(final.blocks)).not.toContain('"action_id":"approve"');
    expect(h.sim.applied.filter((a) => a.vmid === 101)).toHaveLength(1);
  });
});
