import type { KnownBlock, ModalView } from '@slack/types';
import type { CloudRequest } from '../../requests/model/types.ts';
import { leaseCost, leaseEnd, leaseTermText, sizeText } from '../../rules/lease.ts';
import { vmLabel } from './describe.ts';
import { dayText, escapeMrkdwn, mention, mrkdwn, plain, quoted, truncate } from './text.ts';

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

/** Action ids of the buttons on a lease's offer and reminders; their value is the lease's request id. */
export const LEASE_ACTIONS = { return: 'lease_return', keep: 'lease_keep' } as const;

/** Said to someone who clicks after the lease ended. */
export function leaseClosedText(request: CloudRequest): string {
  const lease = request.lease;
  if (lease?.kept)
    return `Nothing changed: ${mention(lease.kept.by)} already kept this size; the lease is closed.`;
  if (lease?.returned)
    return `Nothing changed: request \`${lease.returned.requestId}\` already returned it; the lease is closed.`;
  return 'Nothing changed: this request has no open lease.';
}

/** What the increase has cost from when it ran until `at`, in words. */
function costSoFar(request: CloudRequest, at: Date): string {
  const hourly = request.cost?.leaseHourly;
  const started = new Date(request.lease?.startedAt ?? request.createdAt);
  if (!hourly)
    return `It ran ${dayText(started)}; what it costs is not known (a price or the size is missing).`;
  const { hours, cost } = leaseCost(hourly, started, at);
  return `Since it ran ${dayText(started)} it has cost ${money(request, cost)} more (${hours} h at ${money(request, hourly)}/h).`;
}

/** A lease's Return / Keep buttons: on its offer and reminders, and on the App Homes of those who may choose. */
export function leaseButtons(request: CloudRequest): KnownBlock {
  return {
    type: 'actions',
    block_id: `lease:${request.id}`,
    elements: [
      {
        type: 'button',
        action_id: LEASE_ACTIONS.return,
        text: plain('Return to the previous size', 75),
        style: 'primary',
        value: request.id,
      },
      { type: 'button', action_id: LEASE_ACTIONS.keep, text: plain('Keep it', 75), value: request.id },
    ],
  };
}

/** The lease's thread replies: the offer and the daily reminders (with buttons), and how it ended. */
export function leaseReply(
  request: CloudRequest,
  event: 'lease_offer' | 'lease_reminder' | 'lease_kept' | 'lease_returned',
  step?: number,
): { text: string; blocks?: KnownBlock[] } {
  const asked = request.params.kind === 'resize' ? request.params.lease : undefined;
  const lease = request.lease;
  const back = asked ? sizeText(asked.returnTo) : 'the previous size';
  const ended = lease ? dayText(new Date(lease.endsAt)) : 'now';
  switch (event) {
    case 'lease_kept':
      return {
        text: `Kept at this size by ${mention(lease?.kept?.by ?? 'unknown')}. The lease is closed; no more reminders.\n${quoted(lease?.kept?.reason ?? '')}`,
      };
    case 'lease_returned':
      return {
        text: `:white_check_mark: Back to ${back} by request \`${lease?.returned?.requestId ?? '?'}\`. The lease is closed.`,
      };
    case 'lease_offer':
    case 'lease_reminder': {
      const at = new Date(
        (event === 'lease_offer' ? lease?.offeredAt : lease?.remindedAt) ?? request.updatedAt,
      );
      const lines = [
        event === 'lease_offer'
          ? `:hourglass: *The temporary increase of ${escapeMrkdwn(vmLabel(request))} ended ${ended}.* ${costSoFar(request, at)}`
          : `:alarm_clock: *Reminder${step ? ` ${step}` : ''}:* ${escapeMrkdwn(vmLabel(request))} is still at its temporary size (the lease ended ${ended}). ${costSoFar(request, at)}`,
      ];
      if (lease?.changedSince) {
        lines.push(
          `:warning: Another request resized the VM since: the bot now knows ${sizeText(lease.changedSince)}. The return still proposes ${back}, checked against what the bot knows now.`,
        );
      }
      if (lease?.returnRequestId) lines.push(`A return is requested: request \`${lease.returnRequestId}\`.`);
      lines.push(
        `Return to ${back} (checked and approved like any request; lowering cores or RAM needs the VM stopped), or keep this size with a reason. ${mention(request.requester)} or an approver may choose.`,
      );
      const text = lines.join('\n');
      return { text, blocks: [{ type: 'section', text: mrkdwn(text) }, leaseButtons(request)] };
    }
  }
}

/** "Keep it": a reason is required; the modal carries only the request id. */
export function keepModal(requestId: string, summary: string): ModalView {
  return {
    type: 'modal',
    callback_id: LEASE_VIEWS.keep,
    private_metadata: requestId,
    title: plain('Keep this size', 24),
    submit: plain('Keep it', 24),
    close: plain('Back', 24),
    blocks: [
      {
        type: 'section',
        text: mrkdwn(
          `Keep *${escapeMrkdwn(summary)}* at its temporary size (request \`${requestId}\`)? The lease ends and the reminders stop.`,
        ),
      },
      {
        type: 'input',
        block_id: LEASE_FIELDS_BLOCKS.keepReason,
        label: plain('Why keep it'),
        element: {
          type: 'plain_text_input',
          action_id: LEASE_FIELDS_BLOCKS.keepReason,
          multiline: true,
          max_length: 1000,
          placeholder: plain('For the audit log, e.g. the new load is permanent', 150),
        },
      },
    ],
  };
}

/** Callback ids of the lease's modals. */
export const LEASE_VIEWS = { keep: 'lease_keep' } as const;
/** Block ids of the lease's modal inputs. */
export const LEASE_FIELDS_BLOCKS = { keepReason: 'keep_reason' } as const;

/** `/cloud jobs`: the channel's open leases, overdue first (offered, then by end), one line each. */
export function openLeaseLines(leases: CloudRequest[], now: Date): string[] {
  const overdue = (r: CloudRequest) => r.lease !== undefined && new Date(r.lease.endsAt) <= now;
  const sorted = [...leases].sort((a, b) => {
    const byOverdue = Number(overdue(b)) - Number(overdue(a));
    if (byOverdue !== 0) return byOverdue;
    return new Date(a.lease?.endsAt ?? 0).getTime() - new Date(b.lease?.endsAt ?? 0).getTime();
  });
  return sorted.map((r) => {
    const asked = r.params.kind === 'resize' ? r.params.lease : undefined;
    const ends = r.lease ? dayText(new Date(r.lease.endsAt)) : '?';
    const state = overdue(r) ? `:warning: *overdue* since ${ends}` : `until ${ends}`;
    const cost = r.cost?.leaseHourly ? `, so far ${costSoFarShort(r, now)}` : '';
    return `\`${r.id}\` *${escapeMrkdwn(vmLabel(r))}*: ${state}, then back to ${asked ? sizeText(asked.returnTo) : '?'}${cost}${r.lease?.returnRequestId ? ` · return requested: \`${r.lease.returnRequestId}\`` : ''}`;
  });
}

function costSoFarShort(request: CloudRequest, now: Date): string {
  const hourly = request.cost?.leaseHourly ?? '0';
  const { cost } = leaseCost(hourly, new Date(request.lease?.startedAt ?? request.createdAt), now);
  return money(request, cost);
}
