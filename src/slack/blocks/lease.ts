import type { CloudRequest } from '../../requests/types.ts';
import { leaseCost, leaseEnd, leaseTermText, sizeText } from '../../rules/lease.ts';
import { dayText, escapeMrkdwn, mention, truncate } from './text.ts';

/** "EUR 1.23" for a lease's cost. */
function money(request: CloudRequest, amount: string): string {
  return `${request.cost?.currency ?? ''} ${amount}`.trim();
}

/**
 * The lease line of a request message: before it runs, how long and what it returns to with its cost for that
 * period; after, until when, and how it ended. Undefined for a permanent change.
 */
export function leaseText(request: CloudRequest): string | undefined {
  if (request.params.kind !== 'resize' || !request.params.lease) return undefined;
  const { term, returnTo } = request.params.lease;
  const back = `then back to ${sizeText(returnTo)}`;
  const lease = request.lease;
  const startedAt = new Date(lease?.startedAt ?? request.createdAt);
  const endsAt = lease ? new Date(lease.endsAt) : leaseEnd(term, startedAt);
  const hourly = request.cost?.leaseHourly;
  const period = hourly ? leaseCost(hourly, startedAt, endsAt) : undefined;
  const cost = period
    ? ` The increase costs ${money(request, period.cost)} for those ${period.hours} h (${money(request, hourly ?? '')}/h).`
    : '';
  if (!lease) {
    const counted = 'hours' in term ? ` (${leaseTermText(term)}, counted from when it runs)` : '';
    return `:hourglass: *Temporary:* until ${dayText(endsAt)}${counted}, ${back}.${cost}`;
  }
  if (lease.kept) {
    return `:hourglass: *Was temporary:* kept at this size by ${mention(lease.kept.by)}: “${escapeMrkdwn(truncate(lease.kept.reason, 300))}”. The lease is closed.`;
  }
  if (lease.returned) {
    return `:hourglass: *Was temporary:* back to ${sizeText(returnTo)} (request \`${lease.returned.requestId}\`). The lease is closed.`;
  }
  return `:hourglass: *Temporary:* until ${dayText(endsAt)}, ${back}.${cost}`;
}
