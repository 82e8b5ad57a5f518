import { describe, expect, it } from 'vitest';
import { parsePolicy } from '../../src/config/policy.ts';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { validUntil } from '../../src/requests/tickets.ts';

// How long a run may wait for a ticket system is the approval's validity, counted as the worker's decision check
// counts it: the project's approval_valid_hours over the top level's, and from the end of a freeze that held the work.
const policy = parsePolicy(`
workspace: T0TEAM
currency: EUR
approvers: [U0LEAD]
approval_valid_hours: 24
freeze:
  - { from: "2026-12-20T00:00", to: "2026-12-21T00:00", tz: UTC, reason: year-end }
projects:
  - name: shop-prod
    uuid: 7f0c6f3e-1d2b-4c5a-9e8f-0a1b2c3d4e5f
    channels: [C0PROD]
    approval_valid_hours: 6
  - name: shop-dev
    uuid: 1a2b3c4d-5e6f-4a1b-8c2d-3e4f5a6b7c8d
    channels: [C0DEV]
`);
const [prod, dev] = policy.projects as [(typeof policy.projects)[0], (typeof policy.projects)[0]];

const approvedAt = (at: string) =>
  ({ createdAt: '2026-12-01T08:00:00.000Z', approvals: [{ by: 'U0LEAD', at }] }) as unknown as CloudRequest;

describe("a run's wait for a ticket system ends with the approval's validity", () => {
  it("counts the project's approval_valid_hours, not only the top level's", () => {
    const request = approvedAt('2026-12-01T09:00:00.000Z');
    expect(validUntil(policy, prod, request).toISOString()).toBe('2026-12-01T15:00:00.000Z');
    expect(validUntil(policy, dev, request).toISOString()).toBe('2026-12-02T09:00:00.000Z');
  });

  it('counts from the end of the freeze that held the approved work', () => {
    const request = approvedAt('2026-12-20T10:00:00.000Z');
    expect(validUntil(policy, dev, request).toISOString()).toBe('2026-12-22T00:00:00.000Z');
  });

  it('counts from a break glass, which ran through the freeze, as the worker does: not from the freeze’s end', () => {
    const request = {
      ...approvedAt('2026-12-20T10:00:00.000Z'),
      breakGlass: { by: 'U0ADMIN', reason: 'outage', at: '2026-12-20T12:00:00.000Z' },
    } as CloudRequest;
    expect(validUntil(policy, dev, request).toISOString()).toBe('2026-12-21T12:00:00.000Z');
    expect(validUntil(policy, prod, request).toISOString()).toBe('2026-12-20T18:00:00.000Z');
  });
});
