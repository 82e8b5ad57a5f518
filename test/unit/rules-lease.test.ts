import { describe, expect, it } from 'vitest';
import {
  checkLease,
  leaseCost,
  leaseEnd,
  leaseTermText,
  offerAt,
  parseLeaseTerm,
  sizeText,
} from '../../src/rules/lease.ts';
import { checkResize } from '../../src/rules/resize.ts';
import type { ResizeTarget, VmKnown } from '../../src/rules/types.ts';
import { dayText } from '../../src/slack/blocks/text.ts';
import { parseCloudCommand } from '../../src/slack/commands/parse.ts';

const NOW = new Date('2026-11-24T14:00:00Z');
const HOUR = 3_600_000;
const VM: VmKnown = {
  vmid: 102,
  ha: false,
  cores: 4,
  ramGb: 8,
  osDiskGb: 100,
  cpuClass: 'light',
  wanMode: 'ipv4',
  createdAt: new Date('2026-01-01T00:00:00Z'),
};

function leaseOn(target: ResizeTarget, term = { hours: 48 } as const, vm: VmKnown = VM) {
  const check = checkResize({
    vm,
    target,
    limits: { cores: 64, ramGb: 512, osDiskGb: 4096 },
    configured: { cpuClass: true, privateNetwork: true },
    confirmedStopped: true,
    acceptWanTwoStep: true,
    now: NOW,
  });
  return checkLease({ vm, check, term, now: NOW });
}

describe('parseLeaseTerm', () => {
  it('reads hours, days and a date (the start of that day, UTC)', () => {
    expect(parseLeaseTerm('48h')).toEqual({ hours: 48 });
    expect(parseLeaseTerm('7D')).toEqual({ hours: 168 });
    expect(parseLeaseTerm('2026-12-01')).toEqual({ until: '2026-12-01T00:00:00.000Z' });
  });

  it('refuses zero, more than a year, a date that does not exist and anything else', () => {
    expect(parseLeaseTerm('0h')).toEqual({ error: 'a lease lasts at least 1 hour' });
    expect(parseLeaseTerm('366d')).toEqual({ error: 'a lease lasts at most 365 days' });
    expect(parseLeaseTerm('2026-02-30')).toEqual({ error: '2026-02-30 is not a date' });
    expect(parseLeaseTerm('2 weeks')).toHaveProperty('error');
    expect(parseLeaseTerm('-1h')).toHaveProperty('error');
  });

  it('reads back as people write it', () => {
    expect(leaseTermText({ hours: 48 })).toBe('2 d');
    expect(leaseTermText({ hours: 36 })).toBe('36 h');
    expect(leaseTermText({ until: '2026-12-01T00:00:00.000Z' })).toBe('until 2026-12-01');
  });
});

describe('when a lease ends and its return is offered', () => {
  it('counts a duration from when the increase ran; a date is fixed', () => {
    expect(leaseEnd({ hours: 48 }, NOW).toISOString()).toBe('2026-11-26T14:00:00.000Z');
    expect(leaseEnd({ until: '2026-12-01T00:00:00.000Z' }, NOW).toISOString()).toBe(
      '2026-12-01T00:00:00.000Z',
    );
  });

  it('never offers before the 24-hour rule allows lowering after the last increase', () => {
    const ranAt = NOW;
    expect(offerAt(new Date(NOW.getTime() + 2 * HOUR), ranAt).toISOString()).toBe('2026-11-25T14:00:00.000Z');
    expect(offerAt(new Date(NOW.getTime() + 48 * HOUR), ranAt).toISOString()).toBe(
      '2026-11-26T14:00:00.000Z',
    );
    // Another request raised it again 40 h later: the offer waits 24 h after that one.
    const later = new Date(NOW.getTime() + 40 * HOUR);
    expect(offerAt(new Date(NOW.getTime() + 48 * HOUR), later).toISOString()).toBe(
      '2026-11-27T06:00:00.000Z',
    );
  });

  it('prices every started hour exactly', () => {
    expect(leaseCost('0.0250', NOW, new Date(NOW.getTime() + 48 * HOUR))).toEqual({
      hours: 48,
      cost: '1.20',
    });
    expect(leaseCost('0.0250', NOW, new Date(NOW.getTime() + HOUR + 1))).toEqual({ hours: 2, cost: '0.05' });
  });

  it('shows the end as "Thu 26 Nov 14:00 UTC"', () => {
    expect(dayText(new Date('2026-11-26T14:00:00Z'))).toBe('Thu 26 Nov 14:00 UTC');
    expect(dayText(new Date('2026-11-26T13:59:00.001Z'))).toBe('Thu 26 Nov 14:00 UTC');
  });
});

describe('checkLease: only increases of cores, RAM or CPU class', () => {
  it('returns to the size before, of each field raised', () => {
    const lease = leaseOn({ cores: 8, ramGb: 16, cpuClass: 'regular' });
    expect(lease.violations).toEqual([]);
    expect(lease.returnTo).toEqual({ cores: 4, ramGb: 8, cpuClass: 'light' });
    expect(sizeText(lease.returnTo)).toBe('4 cores / 8 GB / light CPU');
  });

  it('a disk increase in the same request stays, and says so', () => {
    const lease = leaseOn({ cores: 8, osDiskGb: 200 });
    expect(lease.violations).toEqual([]);
    expect(lease.returnTo).toEqual({ cores: 4 });
    expect(lease.notes).toEqual(['The OS disk increase stays when the lease ends: a disk never shrinks.']);
  });

  it('refuses a lease on a decrease, on a disk-only increase and on a WAN change', () => {
    const decrease = leaseOn({ cores: 2 });
    expect(decrease.violations.map((v) => v.field)).toEqual(['lease']);
    expect(decrease.violations[0]?.message).toContain(
      'Only an increase of cores, RAM or CPU class can be temporary',
    );
    expect(decrease.violations[0]?.message).toContain('lowers cores');
    expect(leaseOn({ osDiskGb: 200 }).violations[0]?.message).toContain('raises none of them');
    expect(leaseOn({ cores: 8, wanMode: 'off' }).violations[0]?.message).toContain('changes the WAN mode');
  });

  it('refuses a lease when the size to return to is not known', () => {
    const { cores: _, ...unknownCores } = VM;
    const lease = leaseOn({ cores: 8 }, { hours: 48 }, unknownCores);
    expect(lease.violations[0]?.message).toContain('does not know the current cores');
  });

  it('refuses a date that has passed', () => {
    const lease = leaseOn({ cores: 8 }, { until: '2026-11-24T00:00:00.000Z' } as never);
    expect(lease.violations[0]?.message).toContain('which has passed');
  });
});

describe('/cloud resize … for=', () => {
  const limits = { cores: 32, ramGb: 256, osDiskGb: 2000 };
  it('takes for= with the sizes, in any position', () => {
    expect(parseCloudCommand('resize shop-prod 102 for=48h cores=8', limits)).toMatchObject({
      word: 'resize',
      vmid: 102,
      cores: 8,
      lease: { hours: 48 },
    });
    expect(parseCloudCommand('resize shop-prod 102 cores=8 FOR=2026-12-01', limits)).toMatchObject({
      lease: { until: '2026-12-01T00:00:00.000Z' },
    });
  });

  it('refuses a bad or repeated for=', () => {
    expect(parseCloudCommand('resize shop-prod 102 cores=8 for=soon', limits)).toEqual({
      word: 'error',
      message: expect.stringContaining('`for`: a lease is written as hours (48h), days (7d) or a date'),
    });
    expect(parseCloudCommand('resize for=1d for=2d', limits)).toEqual({
      word: 'error',
      message: '`for` is given twice',
    });
  });
});
