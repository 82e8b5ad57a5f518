/**
 * `cloudops report`'s rows (docs/operations.md#report): every request made in the period, one row each, read from the
 * audit chain alone (its entries are self-contained, and outlive the requests' own retention), and the summary an
 * auditor reads first. Pure: the entries arrive read.
 */
import type { AuditApprover, AuditRecord, AuditRequester } from '../../requests/model/audit-record.ts';

/** One request as the report shows it. */
export interface ReportRow {
  /** When it was made (ISO 8601, UTC). */
  when: string;
  request: string;
  project: string;
  projectId: string;
  vm: number | null;
  /** "cores 2 → 4, ram_gb 4 → 8" or "restore backup-2026-01-01". */
  change: string;
  /** The monthly cost difference with its currency, or ''. */
  costDelta: string;
  requester: string;
  /** "U0LEAD (slack), U0SEC (passkey AbC…)". */
  approvers: string;
  /** The methods used, distinct, in order: "slack", "passkey", "sso". */
  methods: string;
  ticket: string;
  rule: string;
  /** The last state, and the API's task id or answer. */
  outcome: string;
  state: string;
  breakGlass: boolean;
  /** Who ran it during a freeze, how they proved it and why: "U0ADMIN (passkey AbC…): outage", or ''. */
  breakGlassBy: string;
  /** Approvals counted, and how many were verified (passkey or SSO). */
  approvals: number;
  verified: number;
  policyVersion: string;
}

/** What an auditor reads before the rows. */
export interface ReportSummary {
  requests: number;
  /** Requests made per ISO week (its Monday, YYYY-MM-DD) and project. */
  perWeek: { week: string; project: string; count: number }[];
  /** Requests a person rejected, and requests the rules or the API refused. */
  rejected: number;
  refused: number;
  breakGlass: number;
  approvals: number;
  verifiedApprovals: number;
}

/** Entries that record a decision without a change of state. */
const NOTES = new Set(['approval', 'reminder', 'escalation', 'freeze', 'lease']);

/** The states a request ends refused in: by the rules before sending, or by the API. */
const REFUSED = new Set(['refused', 'resolved_failed']);

function requesterText(requester: AuditRequester | undefined, actor: string): string {
  if (!requester) return actor;
  if (requester.agent) return `agent ${requester.agent} for ${requester.on_behalf_of ?? '?'}`;
  if (requester.cli)
    return `cli ${requester.cli.as ? `${requester.cli.as} as ` : ''}${requester.cli.user}@${requester.cli.host}`;
  const who = [
    requester.slack,
    requester.name && `(${requester.name})`,
    requester.email && `<${requester.email}>`,
  ];
  return who.filter(Boolean).join(' ') || actor;
}

/** "U0SEC (passkey AbC…)": a person and how they proved who they are, the credential or subject cut to 12. */
function provedText(user: string, method: string, proof: string | undefined): string {
  const short = proof && proof.length > 12 ? `${proof.slice(0, 12)}…` : proof;
  return `${user} (${method}${short ? ` ${short}` : ''})`;
}

function approverText(approver: AuditApprover): string {
  return provedText(approver.user, approver.method, approver.credential ?? approver.subject);
}

/** The break glass the request's entries last record, as {@link ReportRow.breakGlassBy} reads. */
function breakGlassText(entries: AuditRecord[]): string {
  const glass = entries.findLast((entry) => entry.break_glass !== undefined)?.break_glass;
  if (!glass) return '';
  const { verified } = glass;
  return `${provedText(glass.by, verified?.method ?? 'slack', verified?.subject)}: ${glass.reason}`;
}

function changeText(change: AuditRecord['change']): string {
  if (!change) return '';
  if ('backup' in change && typeof change.backup === 'string')
    return `restore ${change.backup}${change.autostart ? ', autostart' : ''}`;
  return Object.entries(change as Record<string, { before: unknown; after: unknown }>)
    .map(([field, { before, after }]) => `${field} ${before ?? '?'} → ${after}`)
    .join(', ');
}

/** Ends a person decided: the report names who, and why when they said. */
const DECIDED = new Set(['rejected', 'cancelled']);

function outcomeText(last: AuditRecord): string {
  if (DECIDED.has(last.act)) return `${last.act} by ${last.actor}${last.details ? `: ${last.details}` : ''}`;
  const outcome = last.outcome;
  const detail = outcome?.task_id
    ? `task ${outcome.task_id}`
    : outcome?.answer
      ? `${outcome.status ? `${outcome.status} ` : ''}${outcome.answer}`
      : '';
  return detail ? `${last.act}: ${detail}` : last.act;
}

/** The row of one request from its entries, oldest first (the first is its 'created'). */
function rowOf(entries: AuditRecord[]): ReportRow {
  const created = entries[0] as AuditRecord;
  const latest = entries.at(-1) as AuditRecord;
  // The latest entry that is a state, not a note: a reminder after the end does not change the outcome.
  const last = entries.filter((e, i) => i === 0 || !NOTES.has(e.act)).at(-1) as AuditRecord;
  const approvers = latest.approvers ?? [];
  const cost = last.monthly_cost_delta;
  return {
    when: created.time,
    request: created.request_id ?? '',
    project: created.project?.name ?? '',
    projectId: created.project?.id ?? '',
    vm: created.vm ?? null,
    change: changeText(created.change),
    costDelta: cost ? `${cost.amount} ${cost.currency}` : '',
    requester: requesterText(created.requester, created.actor),
    approvers: approvers.map(approverText).join(', '),
    methods: [...new Set(approvers.map((a) => a.method))].join(', '),
    ticket: latest.ticket ?? '',
    rule: latest.rule ?? '',
    outcome: outcomeText(last),
    state: last.act,
    breakGlass: entries.some((entry) => entry.break_glass !== undefined),
    breakGlassBy: breakGlassText(entries),
    approvals: approvers.length,
    verified: approvers.filter((a) => a.method !== 'slack').length,
    policyVersion: created.policy_version ?? '',
  };
}

/** The Monday of `iso`'s week (UTC), as YYYY-MM-DD. */
export function weekOf(iso: string): string {
  const day = new Date(iso);
  const monday = new Date(Date.UTC(day.getUTCFullYear(), day.getUTCMonth(), day.getUTCDate()));
  monday.setUTCDate(monday.getUTCDate() - ((monday.getUTCDay() + 6) % 7));
  return monday.toISOString().slice(0, 10);
}

/**
 * The rows of the requests made from `from` (inclusive) to `to` (exclusive), of `project` only when given (by name
 * or id, any case), in the order they were made; `entries` from the chain, oldest first, reaching past `to` so a
 * request made in the period shows how it ended.
 */
export function reportRows(
  entries: Iterable<AuditRecord>,
  period: { from: Date; to: Date; project?: string },
): ReportRow[] {
  const byRequest = new Map<string, AuditRecord[]>();
  const wanted = period.project?.toLowerCase();
  for (const entry of entries) {
    if (!entry.request_id) continue;
    const list = byRequest.get(entry.request_id);
    if (list) {
      list.push(entry);
      continue;
    }
    if (entry.act !== 'created') continue;
    const at = new Date(entry.time).getTime();
    if (at < period.from.getTime() || at >= period.to.getTime()) continue;
    const project = entry.project;
    if (wanted && project?.name.toLowerCase() !== wanted && project?.id.toLowerCase() !== wanted) continue;
    byRequest.set(entry.request_id, [entry]);
  }
  return [...byRequest.values()].map(rowOf);
}

/** The summary of `rows`. */
export function reportSummary(rows: ReportRow[]): ReportSummary {
  const weeks = new Map<string, number>();
  for (const row of rows) {
    const key = `${weekOf(row.when)}\u0000${row.project}`;
    weeks.set(key, (weeks.get(key) ?? 0) + 1);
  }
  return {
    requests: rows.length,
    perWeek: [...weeks.entries()]
      .map(([key, count]) => {
        const [week = '', project = ''] = key.split('\u0000');
        return { week, project, count };
      })
      .sort((a, b) => a.week.localeCompare(b.week) || a.project.localeCompare(b.project)),
    rejected: rows.filter((r) => r.state === 'rejected').length,
    refused: rows.filter((r) => REFUSED.has(r.state)).length,
    breakGlass: rows.filter((r) => r.breakGlass).length,
    approvals: rows.reduce((sum, r) => sum + r.approvals, 0),
    verifiedApprovals: rows.reduce((sum, r) => sum + r.verified, 0),
  };
}
