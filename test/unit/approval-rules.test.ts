import { describe, expect, it } from 'vitest';
import { type ApprovalsPolicy, type FreezeWindow, parsePolicy } from '../../src/config/policy.ts';
import {
  freezeAt,
  planApproval,
  type RuleFacts,
  resizeFacts,
  resizeKindFor,
  restoreFacts,
  ruleMatches,
} from '../../src/requests/approval/approval-rules.ts';
import type { ResizeParams } from '../../src/requests/model/types.ts';
import { wallTimeIn, zonedToUtc } from '../../src/rules/zoned-time.ts';

/** The approvals of a project as the policy file writes them (so the schema's normalising is part of the test). */
function approvals(yaml: string): ApprovalsPolicy {
  const policy = parsePolicy(
    `approvers: [S0OPS]\nprojects:\n  - name: p\n    uuid: 0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10\n    channels: [C0P]\n    approvals: ${yaml}\n`,
  );
  const found = policy.projects[0]?.approvals;
  if (!found) throw new Error('no approvals');
  return found;
}

function windows(yaml: string): FreezeWindow[] {
  const policy = parsePolicy(`freeze: ${yaml}\n`);
  return policy.freeze ?? [];
}

const up = (changes: RuleFacts['changes'], monthlyDelta?: string): RuleFacts => ({
  kind: 'resize_up',
  changes,
  monthlyDelta,
});

/** The documented example's rules. */
const DOC = approvals(`
      count: 1
      rules:
        - { when: { kind: restore }, count: 2 }
        - { when: { monthly_delta_over: 100 }, count: 2 }
        - { when: { change: [wan, private_network] }, count: 2 }
        - { when: { kind: resize_up, monthly_delta_under: 5 }, count: 0 }`);

describe('planApproval: which rule applies', () => {
  it('the first matching rule wins, named on the plan; nothing matching leaves the default count', () => {
    expect(planApproval(DOC, 'required', restoreFacts(), 'EUR')).toEqual({
      count: 2,
      rule: 'rule 1 (kind restore)',
    });
    expect(planApproval(DOC, 'required', up(['cores'], '100.01'), 'EUR')).toEqual({
      count: 2,
      rule: 'rule 2 (monthly cost difference over 100 EUR)',
    });
    // Rule 3 and rule 4 both match a cheap WAN change: the first of them wins.
    expect(planApproval(DOC, 'required', up(['wan'], '1.00'), 'EUR')).toEqual({
      count: 2,
      rule: 'rule 3 (changes wan or private_network)',
    });
    expect(planApproval(DOC, 'required', up(['cores'], '4.99'), 'EUR')).toEqual({
      count: 0,
      rule: 'rule 4 (kind resize_up, monthly cost difference under 5 EUR)',
    });
    expect(planApproval(DOC, 'required', up(['cores'], '50'), 'EUR')).toEqual({
      count: 1,
      rule: 'the default',
    });
  });

  it('over and under are strict: exactly 100 is not over 100, exactly 5 is not under 5', () => {
    expect(planApproval(DOC, 'required', up(['ram'], '100.00'), 'EUR').count).toBe(1);
    expect(planApproval(DOC, 'required', up(['ram'], '5.00'), 'EUR').count).toBe(1);
    expect(planApproval(DOC, 'required', up(['ram'], '-3.00'), 'EUR').count).toBe(0);
  });

  it('an unknown cost matches neither over nor under', () => {
    expect(planApproval(DOC, 'required', up(['cores']), 'EUR')).toEqual({ count: 1, rule: 'the default' });
    const onlyUnder = approvals(
      `{ count: 1, rules: [{ when: { monthly_delta_under: 1000000 }, count: 0 }] }`,
    );
    expect(planApproval(onlyUnder, 'required', up(['cores']), 'EUR').count).toBe(1);
    expect(planApproval(onlyUnder, 'required', restoreFacts(), 'EUR').count).toBe(1);
  });

  it('approval: none for the kind wins over every rule', () => {
    expect(planApproval(DOC, 'none', restoreFacts(), 'EUR')).toEqual({
      count: 0,
      rule: 'approval: none for restore',
    });
  });

  it('several keys in one when must all match; kind and change take a value or a list; a name replaces the words', () => {
    const rules = approvals(`
      count: 1
      rules:
        - { name: big downsizes, when: { kind: [resize_down], change: disk }, count: 3 }
        - { when: { kind: [resize_up, resize_down], change: [cpu_class] }, count: 2 }`);
    expect(ruleMatches(rules.rules[0]!, { kind: 'resize_down', changes: ['disk'] })).toBe(true);
    expect(ruleMatches(rules.rules[0]!, { kind: 'resize_up', changes: ['disk'] })).toBe(false);
    expect(ruleMatches(rules.rules[0]!, { kind: 'resize_down', changes: ['cores'] })).toBe(false);
    expect(planApproval(rules, 'required', { kind: 'resize_down', changes: ['disk'] }, 'EUR').rule).toBe(
      'rule 1 (big downsizes)',
    );
    expect(
      planApproval(rules, 'required', { kind: 'resize_down', changes: ['cpu_class'] }, 'EUR').count,
    ).toBe(2);
    expect(planApproval(rules, 'required', { kind: 'restore', changes: [] }, 'EUR').count).toBe(1);
  });

  it('count 0 as the default runs everything at once', () => {
    expect(planApproval(approvals('{ count: 0 }'), 'required', restoreFacts(), 'EUR')).toEqual({
      count: 0,
      rule: 'the default',
    });
  });
});

describe('resizeFacts', () => {
  const params = (target: ResizeParams['target'], before: ResizeParams['before']): ResizeParams => ({
    kind: 'resize',
    target,
    steps: [target],
    before,
    confirmedStopped: false,
  });

  it('names the fields that change; a field whose size before is unknown counts as changed', () => {
    const facts = resizeFacts(
      params(
        { cores: 4, ramGb: 8, wanMode: 'ipv6', privateNetwork: 'on', cpuClass: 'light', osDiskGb: 60 },
        { vmid: 1, ha: false, cores: 2, ramGb: 8, wanMode: 'ipv4', cpuClass: 'light' },
      ),
      'resize_up',
      '12.00',
    );
    expect(facts).toEqual({
      kind: 'resize_up',
      changes: ['cores', 'disk', 'wan', 'private_network'],
      monthlyDelta: '12.00',
    });
  });
});

describe('resizeKindFor', () => {
  const counts = { resize_up: 1, resize_down: 0 };
  it('an increase or a decrease alone is its own kind; a mixed or unknown change is the kind that needs more', () => {
    expect(resizeKindFor('resize_up', (k) => counts[k])).toBe('resize_up');
    expect(resizeKindFor('resize_down', (k) => counts[k])).toBe('resize_down');
    expect(resizeKindFor('mixed', (k) => counts[k])).toBe('resize_up');
    expect(resizeKindFor('unknown', (k) => counts[k])).toBe('resize_up');
    expect(resizeKindFor('mixed', () => 2)).toBe('resize_down');
  });
});

describe('zoned time', () => {
  it('converts wall times in a zone, summer and winter', () => {
    const wall = { year: 2026, month: 12, day: 20, hour: 0, minute: 0 };
    expect(zonedToUtc(wall, 'Europe/Berlin').toISOString()).toBe('2026-12-19T23:00:00.000Z');
    expect(zonedToUtc({ ...wall, month: 7 }, 'Europe/Berlin').toISOString()).toBe('2026-07-19T22:00:00.000Z');
    expect(zonedToUtc(wall, 'America/New_York').toISOString()).toBe('2026-12-20T05:00:00.000Z');
    expect(wallTimeIn(new Date('2026-12-19T23:30:00Z'), 'Europe/Berlin')).toMatchObject({
      day: 20,
      hour: 0,
      minute: 30,
      weekday: 0,
    });
  });

  it('a time skipped by the spring change moves on by the gap; a repeated autumn time is its first occurrence', () => {
    // Berlin, 2026-03-29: 02:00 → 03:00.
    expect(
      zonedToUtc({ year: 2026, month: 3, day: 29, hour: 2, minute: 30 }, 'Europe/Berlin').toISOString(),
    ).toBe('2026-03-29T01:30:00.000Z');
    // Berlin, 2026-10-25: 03:00 → 02:00; 02:30 happens at 00:30Z and 01:30Z.
    expect(
      zonedToUtc({ year: 2026, month: 10, day: 25, hour: 2, minute: 30 }, 'Europe/Berlin').toISOString(),
    ).toBe('2026-10-25T00:30:00.000Z');
  });
});

describe('freezeAt: date windows', () => {
  const yearEnd = windows(
    '[{ from: "2026-12-20T00:00", to: "2027-01-04T00:00", tz: Europe/Berlin, reason: year-end }]',
  );

  it('holds from the start (inclusive) to the end (exclusive), in the window’s time zone', () => {
    expect(freezeAt(yearEnd, new Date('2026-12-19T22:59:59Z'))).toBeUndefined();
    expect(freezeAt(yearEnd, new Date('2026-12-19T23:00:00Z'))).toEqual({
      until: new Date('2027-01-03T23:00:00Z'),
      reason: 'year-end',
    });
    expect(freezeAt(yearEnd, new Date('2027-01-03T22:59:00Z'))?.until).toEqual(
      new Date('2027-01-03T23:00:00Z'),
    );
    expect(freezeAt(yearEnd, new Date('2027-01-03T23:00:00Z'))).toBeUndefined();
  });

  it('a UTC window, and no windows at all', () => {
    const utc = windows('[{ from: "2026-06-01T08:00", to: "2026-06-01T09:00" }]');
    expect(freezeAt(utc, new Date('2026-06-01T08:30:00Z'))?.until).toEqual(new Date('2026-06-01T09:00:00Z'));
    expect(freezeAt([], new Date('2026-06-01T08:30:00Z'))).toBeUndefined();
  });

  it('windows that overlap or follow on without a gap are one freeze, ending at the last end', () => {
    const chained = windows(`
  - { from: "2026-06-01T08:00", to: "2026-06-01T10:00", reason: first }
  - { from: "2026-06-01T10:00", to: "2026-06-01T12:00" }
  - { from: "2026-06-01T11:00", to: "2026-06-01T13:00" }
  - { from: "2026-06-01T14:00", to: "2026-06-01T15:00" }`);
    expect(freezeAt(chained, new Date('2026-06-01T09:00:00Z'))).toEqual({
      until: new Date('2026-06-01T13:00:00Z'),
      reason: 'first',
    });
    expect(freezeAt(chained, new Date('2026-06-01T13:30:00Z'))).toBeUndefined();
  });
});

describe('freezeAt: weekly windows', () => {
  const friday = windows(
    '[{ weekly: { days: [fri], from: "15:00", to: "23:59" }, tz: Europe/Berlin, reason: no Friday changes }]',
  );

  it('holds on the listed day between from and to, local time', () => {
    // Friday 2026-11-27, 15:00 in Berlin is 14:00Z (winter time).
    expect(freezeAt(friday, new Date('2026-11-27T13:59:00Z'))).toBeUndefined();
    expect(freezeAt(friday, new Date('2026-11-27T14:00:00Z'))).toEqual({
      until: new Date('2026-11-27T22:59:00Z'),
      reason: 'no Friday changes',
    });
    expect(freezeAt(friday, new Date('2026-11-27T22:59:00Z'))).toBeUndefined();
    // Thursday and Saturday at the same hour are free.
    expect(freezeAt(friday, new Date('2026-11-26T16:00:00Z'))).toBeUndefined();
    expect(freezeAt(friday, new Date('2026-11-28T16:00:00Z'))).toBeUndefined();
    // In summer time the same local window is an hour earlier in UTC.
    expect(freezeAt(friday, new Date('2026-07-03T13:30:00Z'))?.until).toEqual(
      new Date('2026-07-03T21:59:00Z'),
    );
  });

  it('a window crossing midnight holds into the next day, and not before its start day', () => {
    const nights = windows('[{ weekly: { days: [mon], from: "22:00", to: "06:00" }, tz: Europe/Berlin }]');
    // Monday 2026-11-23 22:00 Berlin = 21:00Z; ends Tuesday 06:00 Berlin = 05:00Z.
    expect(freezeAt(nights, new Date('2026-11-23T20:59:00Z'))).toBeUndefined();
    expect(freezeAt(nights, new Date('2026-11-23T21:00:00Z'))?.until).toEqual(
      new Date('2026-11-24T05:00:00Z'),
    );
    expect(freezeAt(nights, new Date('2026-11-24T03:00:00Z'))?.until).toEqual(
      new Date('2026-11-24T05:00:00Z'),
    );
    expect(freezeAt(nights, new Date('2026-11-24T05:00:00Z'))).toBeUndefined();
    // Monday early morning belongs to Sunday night, which is not listed.
    expect(freezeAt(nights, new Date('2026-11-23T03:00:00Z'))).toBeUndefined();
  });

  it('days in a row that run to 24:00 and from 00:00 are one freeze, over the weekend', () => {
    const weekend = windows(
      '[{ weekly: { days: [sat, sun], from: "00:00", to: "24:00" }, tz: Europe/Berlin }]',
    );
    expect(freezeAt(weekend, new Date('2026-11-28T10:00:00Z'))?.until).toEqual(
      new Date('2026-11-29T23:00:00Z'),
    );
  });

  it('a night window across the autumn change lasts an hour longer in UTC; across the spring change an hour shorter', () => {
    const saturdayNights = windows(
      '[{ weekly: { days: [sat], from: "22:00", to: "06:00" }, tz: Europe/Berlin }]',
    );
    // 2026-10-24 (Sat) 22:00 CEST = 20:00Z; 2026-10-25 06:00 CET = 05:00Z: 9 hours.
    const autumn = freezeAt(saturdayNights, new Date('2026-10-24T20:00:00Z'));
    expect(autumn?.until).toEqual(new Date('2026-10-25T05:00:00Z'));
    // 2026-03-28 (Sat) 22:00 CET = 21:00Z; 2026-03-29 06:00 CEST = 04:00Z: 7 hours.
    expect(freezeAt(saturdayNights, new Date('2026-03-28T21:00:00Z'))?.until).toEqual(
      new Date('2026-03-29T04:00:00Z'),
    );
    expect(freezeAt(saturdayNights, new Date('2026-03-29T03:59:00Z'))).toBeDefined();
    expect(freezeAt(saturdayNights, new Date('2026-03-29T04:00:00Z'))).toBeUndefined();
  });

  it('a date window and a weekly window that meet are one freeze', () => {
    const both = windows(`
  - { from: "2026-11-27T12:00", to: "2026-11-27T15:00", tz: Europe/Berlin }
  - { weekly: { days: [fri], from: "15:00", to: "18:00" }, tz: Europe/Berlin }`);
    expect(freezeAt(both, new Date('2026-11-27T12:00:00Z'))?.until).toEqual(new Date('2026-11-27T17:00:00Z'));
  });
});
