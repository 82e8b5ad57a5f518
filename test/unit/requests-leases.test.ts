import { describe, expect, it } from 'vitest';
import { changedSince, leaseStep, openLease, returnedPatch } from '../../src/requests/leases.ts';
import type { CloudRequest } from '../../src/requests/model/types.ts';

const HOUR = 3_600_000;
const RAN = new Date('2026-11-24T14:00:00Z');
const at = (hours: number) => new Date(RAN.getTime() + hours * HOUR);

function leased(over: Partial<CloudRequest> = {}): CloudRequest {
  return {
    id: 'RLEASE01',
    kind: 'resize',
    state: 'succeeded',
    version: 5,
    teamId: 'T0TEST',
    channel: 'C0PROD',
    projectName: 'shop-prod',
    projectUuid: '0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10',
    vmid: 102,
    params: {
      kind: 'resize',
      target: { cores: 8, ramGb: 16 },
      steps: [{ cores: 8, ramGb: 16 }],
      before: { vmid: 102, ha: false, cores: 4, ramGb: 8 },
      confirmedStopped: false,
      lease: { term: { hours: 48 }, returnTo: { cores: 4, ramGb: 8 } },
    },
    requester: 'U0DEV',
    needsApproval: true,
    approvers: ['U0LEAD'],
    createdAt: RAN.toISOString(),
    updatedAt: RAN.toISOString(),
    expiresAt: at(24).toISOString(),
    nextStep: 1,
    outcomes: [],
    notes: [],
    ...over,
  };
}

describe('a lease from its increase to its end', () => {
  it('opens when the increase ran, with its end and the first offer', () => {
    const opened = openLease(leased(), RAN);
    expect(opened).toEqual({
      lease: { startedAt: RAN.toISOString(), endsAt: at(48).toISOString() },
      offerAt: at(48),
    });
    // Opened once: a request that has its lease already opens none again; a permanent change opens none.
    expect(openLease(leased({ lease: opened?.lease }), RAN)).toBeUndefined();
    const permanent = leased();
    if (permanent.params.kind === 'resize') delete permanent.params.lease;
    expect(openLease(permanent, RAN)).toBeUndefined();
  });

  it('waits for the end and the 24-hour rule, offers, then reminds once a day', () => {
    const open = leased({
      leaseOpen: true,
      lease: { startedAt: RAN.toISOString(), endsAt: at(2).toISOString() },
    });
    expect(leaseStep(open, RAN, at(3))).toEqual({ next: 'wait', until: at(24) });
    expect(leaseStep(open, at(10), at(30))).toEqual({ next: 'wait', until: at(34) });
    expect(leaseStep(open, RAN, at(24))).toEqual({ next: 'offer' });
    const offered = leased({ leaseOpen: true, lease: { ...open.lease!, offeredAt: at(24).toISOString() } });
    expect(leaseStep(offered, RAN, at(47))).toEqual({ next: 'wait', until: at(48) });
    expect(leaseStep(offered, RAN, at(48))).toEqual({ next: 'remind', count: 1 });
    const reminded = leased({
      leaseOpen: true,
      lease: { ...offered.lease!, remindedAt: at(48).toISOString(), reminders: 1 },
    });
    expect(leaseStep(reminded, RAN, at(60))).toEqual({ next: 'wait', until: at(72) });
    expect(leaseStep(reminded, RAN, at(500))).toEqual({ next: 'remind', count: 2 });
    expect(leaseStep(leased({ leaseOpen: false, lease: open.lease }), RAN, at(500))).toEqual({
      next: 'none',
    });
  });

  it('notices a VM another request resized since', () => {
    expect(changedSince(leased(), { vmid: 102, ha: false, cores: 8, ramGb: 16 })).toBeUndefined();
    expect(changedSince(leased(), { vmid: 102, ha: false, cores: 12, ramGb: 16 })).toEqual({
      cores: 12,
      ramGb: 16,
    });
  });

  it('ends on the return only while open', () => {
    const open = leased({
      leaseOpen: true,
      lease: { startedAt: RAN.toISOString(), endsAt: at(48).toISOString() },
    });
    expect(returnedPatch(open, 'RBACK001', at(50))).toEqual({
      leaseOpen: false,
      lease: { ...open.lease, returned: { requestId: 'RBACK001', at: at(50).toISOString() } },
    });
    expect(
      returnedPatch(leased({ leaseOpen: false, lease: open.lease }), 'RBACK001', at(50)),
    ).toBeUndefined();
  });
});
