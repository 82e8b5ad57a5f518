import {
  type CloudRequest,
  type RequestState,
  type ResizeParams,
  refusedBeforeSending,
} from '../../requests/model/types.ts';
import type { ResizeTarget } from '../../rules/types.ts';
import { escapeMrkdwn } from './text.ts';

/** How each state reads to a person, with an emoji that scans in a busy channel. */
export const STATE_LABEL: Record<RequestState, string> = {
  pending: ':hourglass_flowing_sand: Waiting for approval',
  approved: ':white_check_mark: Approved',
  rejected: ':no_entry_sign: Rejected',
  expired: ':zzz: Expired',
  cancelled: ':heavy_multiplication_x: Cancelled',
  queued: ':inbox_tray: Queued',
  sending: ':arrows_counterclockwise: Running',
  succeeded: ':white_check_mark: Done',
  refused: ':x: Refused by the API',
  unknown: ':warning: Outcome unknown',
  resolved_done: ':white_check_mark: Marked done after checking',
  resolved_failed: ':x: Marked failed after checking',
  frozen: ':snowflake: Approved, waiting for a freeze to end',
};

/**
 * A request's state as a person reads it. A restore the API accepted is not done: the API gives no way to follow its
 * task, so it reads as started, with the task id when there is one. A refusal by cloudops's own re-check is not the
 * API's.
 */
export function stateLabel(request: CloudRequest): string {
  if (request.state === 'succeeded' && request.params.kind === 'restore') {
    const taskId = request.outcomes[request.outcomes.length - 1]?.taskId;
    return `:white_check_mark: Restore started${taskId ? ` (task ${escapeMrkdwn(taskId)})` : ''}`;
  }
  if (refusedBeforeSending(request)) return ':x: Refused by cloudops, not sent';
  return STATE_LABEL[request.state];
}

const FIELD_LABEL: Record<keyof ResizeTarget, string> = {
  cores: 'Cores',
  ramGb: 'RAM',
  osDiskGb: 'OS disk',
  cpuClass: 'CPU class',
  wanMode: 'WAN',
  privateNetwork: 'Private network',
};

function unit(field: keyof ResizeTarget, value: unknown): string {
  if (value === undefined) return '?';
  return field === 'ramGb' || field === 'osDiskGb' ? `${value} GB` : String(value);
}

/** "Cores: 2 → 4" lines for a resize; the WAN line shows the stop at `off` of a two-step plan. */
export function changeLines(params: ResizeParams): string[] {
  const lines: string[] = [];
  const fields = Object.keys(FIELD_LABEL) as (keyof ResizeTarget)[];
  for (const field of fields) {
    const to = params.target[field];
    if (to === undefined) continue;
    const from = params.before[field as keyof typeof params.before];
    if (from === to) continue;
    const via = field === 'wanMode' && params.steps.length > 1 ? ' → off' : '';
    lines.push(`${FIELD_LABEL[field]}: ${unit(field, from)}${via} → ${unit(field, to)}`);
  }
  return lines;
}

/** What a step sends, e.g. "WAN off, cores 4", for step-by-step replies. */
export function stepSummary(step: ResizeTarget): string {
  const fields = Object.keys(step) as (keyof ResizeTarget)[];
  return fields.map((f) => `${FIELD_LABEL[f]} ${unit(f, step[f])}`).join(', ');
}

/** "shop-prod / VM 101 (web-1)". */
export function vmLabel(request: Pick<CloudRequest, 'projectName' | 'vmid' | 'vmName'>): string {
  return `${request.projectName} / VM ${request.vmid}${request.vmName ? ` (${request.vmName})` : ''}`;
}

/** What a request does in one line of mrkdwn: "Cores: 2 → 4, RAM: 4 GB → 8 GB" or "restore from `slug`". */
export function summary(request: CloudRequest): string {
  if (request.params.kind === 'restore') return `restore from \`${escapeMrkdwn(request.params.backupSlug)}\``;
  return escapeMrkdwn(changeLines(request.params).join(', ') || 'resize');
}
