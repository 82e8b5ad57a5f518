import type {
  ApprovalKind,
  ApprovalMode,
  ApprovalRule,
  ApprovalsPolicy,
  ChangeName,
  FreezeWindow,
  Weekday,
} from '../../config/policy.ts';
import type { VerifyMethod } from '../../config/verification-policy.ts';
import type { ChangeScope } from '../../rules/change-scope.ts';
import { Decimal } from '../../rules/decimal.ts';
import type { ResizeTarget } from '../../rules/types.ts';
import {
  dayAfter,
  parseClock,
  parseWallTime,
  wallTimeIn,
  weekdayOf,
  zonedToUtc,
} from '../../rules/zoned-time.ts';
import type { ResizeParams } from '../model/types.ts';

/**
 * The approval policy as pure functions (docs/policy.md#approval-policies): which rule applies to a request and
 * how many approvals it needs, and whether a freeze holds work at a given instant. No I/O, no clock of its own.
 */

/** What the rules look at in a request. */
export interface RuleFacts {
  kind: ApprovalKind;
  /** The fields the request changes. */
  changes: ChangeName[];
  /** The monthly cost difference (after minus before) as a decimal string; undefined when unknown. */
  monthlyDelta?: string;
}

/** How many distinct approvals a request needs, and the words for the rule that said so. */
export interface ApprovalPlan {
  count: number;
  /** "rule 2 (monthly increase over 100 EUR)", "the project's default", "approval: none for restore". */
  rule: string;
  /**
   * Set when every approval must be verified (docs/policy.md#verified-approvals): the methods that satisfy it, either
   * one. The matching rule's `verify` replaces the block's; a plan of no approval has none.
   */
  verify?: VerifyMethod[];
  /** Where `verify` came from: the applying rule's own, or its block's (which an agent's own `verify` replaces). */
  verifyFrom?: 'rule' | 'block';
}

const FIELD_CHANGE: Record<keyof ResizeTarget, ChangeName> = {
  cores: 'cores',
  ramGb: 'ram',
  osDiskGb: 'disk',
  cpuClass: 'cpu_class',
  wanMode: 'wan',
  privateNetwork: 'private_network',
};

/** The facts of a resize: what it changes (a field whose size before is unknown counts as changed) and its cost. */
export function resizeFacts(
  params: ResizeParams,
  kind: 'resize_up' | 'resize_down',
  monthlyDelta?: string,
): RuleFacts {
  const changes: ChangeName[] = [];
  for (const field of Object.keys(FIELD_CHANGE) as (keyof ResizeTarget)[]) {
    const to = params.target[field];
    if (to !== undefined && params.before[field as keyof typeof params.before] !== to)
      changes.push(FIELD_CHANGE[field]);
  }
  return { kind, changes, monthlyDelta };
}

/**
 * The approval kind a resize is planned as: `resize_up` when it only raises, `resize_down` when it only lowers. One
 * that raises and lowers, or whose direction the bot cannot tell, is planned as whichever kind needs more approvals
 * (`resize_down` on a tie), so that neither kind's count-0 rule lets through what the other kind's rules would hold.
 * `need` is the count the policy asks for a kind.
 */
export function resizeKindFor(
  direction: ChangeScope['direction'],
  need: (kind: 'resize_up' | 'resize_down') => number,
): 'resize_up' | 'resize_down' {
  if (direction === 'resize_up' || direction === 'none') return 'resize_up';
  if (direction === 'resize_down') return 'resize_down';
  return need('resize_up') > need('resize_down') ? 'resize_up' : 'resize_down';
}

/** A restore changes no size and has no cost difference: cost conditions never match it. */
export function restoreFacts(): RuleFacts {
  return { kind: 'restore', changes: [] };
}

function compareDelta(delta: string | undefined, bound: number): -1 | 0 | 1 | undefined {
  if (delta === undefined) return undefined;
  try {
    return Decimal.parse(delta).compare(Decimal.parse(String(bound)));
  } catch {
    // A bound written with an exponent, or a delta that is not a plain decimal: treated as unknown.
    return undefined;
  }
}

/** Whether every key of the rule's `when` matches; an unknown cost never matches a cost condition. */
export function ruleMatches(rule: ApprovalRule, facts: RuleFacts): boolean {
  const { kind, change, monthly_delta_over: over, monthly_delta_under: under } = rule.when;
  if (kind && !kind.includes(facts.kind)) return false;
  if (change && !change.some((c) => facts.changes.includes(c))) return false;
  if (over !== undefined && compareDelta(facts.monthlyDelta, over) !== 1) return false;
  if (under !== undefined && compareDelta(facts.monthlyDelta, under) !== -1) return false;
  return true;
}

/** A rule in words, for the request message and the audit: its `name`, else its `when`. */
export function describeRule(rule: ApprovalRule, index: number, currency: string): string {
  if (rule.name) return `rule ${index + 1} (${rule.name})`;
  const parts: string[] = [];
  const { kind, change, monthly_delta_over: over, monthly_delta_under: under } = rule.when;
  if (kind) parts.push(`kind ${kind.join(' or ')}`);
  if (change) parts.push(`changes ${change.join(' or ')}`);
  if (over !== undefined) parts.push(`monthly cost difference over ${over} ${currency}`);
  if (under !== undefined) parts.push(`monthly cost difference under ${under} ${currency}`);
  return `rule ${index + 1} (${parts.length > 0 ? parts.join(', ') : 'every request'})`;
}

/**
 * The approvals a request needs: `approval: none` for its kind wins over every rule; else the first rule that
 * matches; else the default count.
 */
export function planApproval(
  approvals: ApprovalsPolicy,
  mode: ApprovalMode,
  facts: RuleFacts,
  currency: string,
): ApprovalPlan {
  if (mode === 'none') return { count: 0, rule: `approval: none for ${facts.kind}` };
  const index = approvals.rules.findIndex((rule) => ruleMatches(rule, facts));
  const rule = approvals.rules[index];
  const plan: ApprovalPlan = rule
    ? { count: rule.count, rule: describeRule(rule, index, currency) }
    : { count: approvals.count, rule: 'the default' };
  const verify = rule?.verify ?? approvals.verify;
  if (plan.count === 0 || !verify) return plan;
  return { ...plan, verify, verifyFrom: rule?.verify ? 'rule' : 'block' };
}

/**
 * A resize planned as `resize_down` that also raises something (a mixed change, or one whose direction is unknown)
 * must meet the verification an increase would need too: the methods both accept, else the increase's. `increase`
 * is the plan of the same change as `resize_up`.
 */
export function withIncreaseVerify(plan: ApprovalPlan, increase: ApprovalPlan | undefined): ApprovalPlan {
  const also = increase?.count ? increase.verify : undefined;
  if (!also || plan.count === 0) return plan;
  if (!plan.verify) return { ...plan, verify: also, verifyFrom: 'rule' };
  const both = plan.verify.filter((m) => also.includes(m));
  return { ...plan, verify: both.length > 0 ? both : also };
}

/** "passkey", "SSO", "passkey or SSO": the methods as the message and the CLI name them. */
export function verifyText(methods: readonly VerifyMethod[]): string {
  return methods.map((m) => (m === 'sso' ? 'SSO' : 'passkey')).join(' or ');
}

/** "1 approval", "2 approvals", "no approval". */
export function approvalsText(count: number): string {
  return count === 0 ? 'no approval' : `${count} approval${count === 1 ? '' : 's'}`;
}

/** A freeze that holds work now: until when (the end of every window that follows on without a gap), and why. */
export interface FreezeHit {
  until: Date;
  reason?: string;
}

const DAY_INDEX: Record<Weekday, number> = { sun: 0, mon: 1, tue: 2, wed: 3, thu: 4, fri: 5, sat: 6 };

/** The window covering `at`: its end. Weekly windows start on a listed day and may end on the next one. */
function windowEnd(window: FreezeWindow, at: Date): Date | undefined {
  if (!window.weekly) {
    const from = parseWallTime(window.from ?? '');
    const to = parseWallTime(window.to ?? '');
    if (!from || !to) return undefined;
    const start = zonedToUtc(from, window.tz);
    const end = zonedToUtc(to, window.tz);
    return start <= at && at < end ? end : undefined;
  }
  const from = parseClock(window.weekly.from) ?? 0;
  const to = parseClock(window.weekly.to) ?? 0;
  const days = new Set(window.weekly.days.map((d) => DAY_INDEX[d]));
  const today = wallTimeIn(at, window.tz);
  // A window that crosses midnight and began yesterday may still hold today.
  for (const back of [1, 0]) {
    const startDay = dayAfter(today, -back, Math.floor(from / 60), from % 60);
    if (!days.has(weekdayOf(startDay))) continue;
    const start = zonedToUtc(startDay, window.tz);
    const endDay = dayAfter(startDay, to > from ? 0 : 1, 0, 0);
    const end = zonedToUtc(dayAfter(endDay, 0, Math.floor(to / 60), to % 60), window.tz);
    if (start <= at && at < end) return end;
  }
  return undefined;
}

/**
 * Whether a freeze holds work at `at`, and until when: windows that overlap or follow on without a gap are one
 * freeze, so the end is when work may really run.
 */
export function freezeAt(windows: FreezeWindow[], at: Date): FreezeHit | undefined {
  let hit: FreezeHit | undefined;
  let t = at;
  // Bounded: a chain of windows longer than this is a policy nobody writes.
  for (let round = 0; round < 64; round++) {
    let found: { end: Date; reason?: string } | undefined;
    for (const window of windows) {
      const end = windowEnd(window, t);
      if (end && (!found || end > found.end)) found = { end, reason: window.reason };
    }
    if (!found) break;
    hit = { until: found.end, reason: hit?.reason ?? found.reason };
    t = found.end;
  }
  return hit;
}
