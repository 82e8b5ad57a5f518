import type { KnownBlock } from '@slack/types';
import type { RenderedMessage, RequestRenderer } from '../../jobs/renderers.ts';
import { approvalsText, verifyText } from '../../requests/approval/approval-rules.ts';
import { currentApprovers } from '../../requests/approval/approvers.ts';
import { type CloudRequest, FINAL_STATES, type ReplyEvent } from '../../requests/model/types.ts';
import { changeLines, stateLabel, stepSummary, vmLabel } from './describe.ts';
import { leaseReply, leaseText } from './lease.ts';
import {
  actorText,
  escapeMrkdwn,
  inlineQuoted,
  mention,
  mentionAny,
  mrkdwn,
  plain,
  quoted,
  requesterText,
  slackDate,
  truncate,
} from './text.ts';
import { ticketLine } from './ticket.ts';

/** Action ids of the buttons on request messages and thread replies; their value is the request id. */
export const ACTIONS = {
  approve: 'approve',
  reject: 'reject',
  cancel: 'cancel',
  resolveDone: 'resolve_done',
  resolveFailed: 'resolve_failed',
  breakGlass: 'break_glass',
} as const;

function title(request: CloudRequest): string {
  const verb = request.kind === 'resize' ? 'Resize' : 'Restore';
  return `${verb} ${vmLabel(request)}`;
}

function whatChanges(request: CloudRequest): string {
  const params = request.params;
  if (params.kind === 'restore') {
    return [
      `Restore from backup \`${escapeMrkdwn(params.backupSlug)}\`: the VM's disk is overwritten.`,
      params.autostart ? 'Starts the VM when the restore is done.' : 'Leaves the VM stopped.',
    ].join('\n');
  }
  const lines = changeLines(params).map((l) => `• ${escapeMrkdwn(l)}`);
  // Nothing differs from what the bot knew (its facts may be stale): say what will be sent instead.
  if (lines.length === 0) {
    lines.push(...params.steps.map((step) => `• Sends ${escapeMrkdwn(stepSummary(step) || 'no change')}`));
  }
  if (params.steps.length > 1)
    lines.push('_Runs in two steps, as the API requires: WAN off first, then the new mode._');
  return lines.join('\n');
}

function costText(request: CloudRequest): string | undefined {
  const cost = request.cost;
  if (!cost) return undefined;
  const sign = (v: string) => (v.startsWith('-') ? v.replace('-', '−') : `+${v}`);
  let text = `*Cost after the change* in ${escapeMrkdwn(cost.cluster)}: ${cost.currency} ${cost.hourly}/h · ${cost.currency} ${cost.monthly}/month`;
  if (cost.diffHourly !== undefined && cost.diffMonthly !== undefined) {
    text += ` (${sign(cost.diffHourly)}/h, ${sign(cost.diffMonthly)}/month)`;
  }
  if (cost.note) text += `\n_${escapeMrkdwn(cost.note)}_`;
  return text;
}

/** Everyone whose approval counted, in order; older requests knew only the one approver. */
function approvedBy(request: CloudRequest): string[] {
  const users = (request.approvals ?? []).map((a) => a.user);
  if (users.length === 0 && request.approvedBy) users.push(request.approvedBy);
  return users;
}

/** "@a", "@a and @b", "@a, @b and @c". */
function listed(ids: string[]): string {
  return inWords(ids.map(mentionAny));
}

function inWords(items: string[]): string {
  return items.length <= 1
    ? (items[0] ?? '')
    : `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`;
}

/** "@a (verified: passkey)", "@b (verified: SSO)", "@c": each approver, with how they proved who they are. */
function approverWords(request: CloudRequest): string[] {
  const approvals = request.approvals ?? [];
  if (approvals.length === 0) return approvedBy(request).map(mention);
  return approvals.map(
    (a) => `${mention(a.user)}${a.verified ? ` (verified: ${verifyText([a.verified.method])})` : ''}`,
  );
}

/** "@a (verified: passkey)", or "@a" for a break glass from Slack alone. */
function breakerWords(breakGlass: NonNullable<CloudRequest['breakGlass']>): string {
  const { verified } = breakGlass;
  return `${mention(breakGlass.by)}${verified ? ` (verified: ${verifyText([verified.method])})` : ''}`;
}

/** "Needs a verified approval (passkey or SSO)…", on a request whose approvals must be verified. */
function verifiedLine(request: CloudRequest): string | undefined {
  if (!request.verify || !request.needsApproval) return undefined;
  const needed = request.requiredApprovals ?? 1;
  const each = needed > 1 ? ', each of them' : '';
  return `:lock: Needs a verified approval${each} (${verifyText(request.verify)}): Approve sends the approver a link to verify on, then it counts.`;
}

/** Who may still approve: the approvers (and, once escalated, those escalated to) who have not, the requester never. */
export function stillToApprove(request: CloudRequest): string[] {
  const done = new Set([...approvedBy(request), request.requester]);
  return currentApprovers(request).filter((id) => !done.has(id));
}

/** "1 of 2 approvals: @bob", and the rule that set the count. */
function progressLine(request: CloudRequest): string | undefined {
  const needed = request.requiredApprovals ?? (request.needsApproval ? 1 : 0);
  const rule = request.approvalRule ? ` by ${escapeMrkdwn(request.approvalRule)}` : '';
  if (needed === 0) return request.approvalRule ? `Needs no approval${rule}` : undefined;
  const users = approverWords(request);
  const who = users.length > 0 ? `: ${users.join(', ')}` : '';
  return `*${users.length} of ${needed} approval${needed === 1 ? '' : 's'}*${who} (${approvalsText(needed)} needed${rule})`;
}

function whoActed(request: CloudRequest): string[] {
  const lines = [
    `${request.agent ? 'Asked by' : 'Requested by'} ${requesterText(request)} ${slackDate(new Date(request.createdAt))}`,
  ];
  if (request.agent?.disabled && !FINAL_STATES.includes(request.state))
    lines.push(
      `:no_entry: Agent ${escapeMrkdwn(request.agent.name)} is disabled (\`cloudops agents disable\`): Approve is refused until it is enabled again. Reject or cancel it instead.`,
    );
  const progress = progressLine(request);
  if (progress) lines.push(progress);
  const verified = request.state === 'pending' ? verifiedLine(request) : undefined;
  if (verified) lines.push(verified);
  if (request.breakGlass)
    lines.push(
      `Run during the freeze by ${breakerWords(request.breakGlass)}: ${inlineQuoted(request.breakGlass.reason)}`,
    );
  if (request.rejectedBy) {
    const why = request.rejectReason ? `: ${inlineQuoted(request.rejectReason)}` : '';
    lines.push(`Rejected by ${mention(request.rejectedBy)}${why}`);
  }
  if (request.cancelledBy) lines.push(`Cancelled by ${actorText(request.cancelledBy)}`);
  if (request.resolvedBy) lines.push(`Checked by ${mention(request.resolvedBy)}`);
  if (request.state === 'pending') {
    const who = stillToApprove(request);
    const may =
      request.needsApproval && who.length > 0
        ? `May still approve: ${who.map(mentionAny).join(', ')} · `
        : '';
    lines.push(`${may}expires ${slackDate(new Date(request.expiresAt))}`);
  }
  return lines;
}

function buttons(request: CloudRequest): KnownBlock | undefined {
  const value = request.id;
  const scheduledNotStarted = request.state === 'queued' && request.runAt !== undefined;
  if (request.state === 'pending') {
    const elements = [];
    if (request.needsApproval) {
      elements.push(
        {
          type: 'button' as const,
          action_id: ACTIONS.approve,
          text: plain('Approve', 75),
          style: 'primary' as const,
          value,
        },
        {
          type: 'button' as const,
          action_id: ACTIONS.reject,
          text: plain('Reject', 75),
          style: 'danger' as const,
          value,
        },
      );
    }
    elements.push({
      type: 'button' as const,
      action_id: ACTIONS.cancel,
      text: plain('Cancel request', 75),
      value,
    });
    return { type: 'actions', block_id: `request:${request.id}`, elements };
  }
  if (request.state === 'frozen') {
    return {
      type: 'actions',
      block_id: `request:${request.id}`,
      elements: [
        { type: 'button', action_id: ACTIONS.cancel, text: plain('Cancel', 75), value },
        {
          type: 'button',
          action_id: ACTIONS.breakGlass,
          text: plain('Run now (break glass)', 75),
          style: 'danger',
          value,
        },
      ],
    };
  }
  if (scheduledNotStarted) {
    return {
      type: 'actions',
      block_id: `request:${request.id}`,
      elements: [
        { type: 'button', action_id: ACTIONS.cancel, text: plain('Cancel scheduled run', 75), value },
      ],
    };
  }
  return undefined;
}

/** The request message: what changes, its cost, the rules, the reason, who acted, and live buttons. */
function requestMessage(request: CloudRequest): RenderedMessage {
  const blocks: KnownBlock[] = [
    { type: 'header', text: plain(truncate(title(request), 150), 150) },
    {
      type: 'section',
      text: mrkdwn(`*${stateLabel(request)}* · request \`${request.id}\``),
    },
    { type: 'section', text: mrkdwn(whatChanges(request)) },
  ];
  const cost = costText(request);
  if (cost) blocks.push({ type: 'section', text: mrkdwn(cost) });
  const lease = leaseText(request);
  if (lease) blocks.push({ type: 'section', text: mrkdwn(lease) });
  if (request.runAt) {
    blocks.push({
      type: 'section',
      text: mrkdwn(
        `:alarm_clock: Scheduled for ${slackDate(new Date(request.runAt))}, the earliest time the 24-hour rule allows.`,
      ),
    });
  }
  if (request.state === 'frozen' && request.frozenUntil) {
    blocks.push({
      type: 'section',
      text: mrkdwn(
        `:snowflake: A freeze holds ${escapeMrkdwn(request.projectName)}${request.freezeReason ? ` (${escapeMrkdwn(request.freezeReason)})` : ''} until ${slackDate(new Date(request.frozenUntil))}: this runs then, after the rules are checked again. It can be cancelled until then.`,
      ),
    });
  }
  if (request.notes.length > 0) {
    blocks.push({
      type: 'section',
      text: mrkdwn(request.notes.map((n) => `• ${escapeMrkdwn(n)}`).join('\n')),
    });
  }
  if (request.reason) {
    blocks.push({
      type: 'section',
      text: mrkdwn(`*Reason:*\n${quoted(request.reason)}`),
    });
  }
  if (request.ticket) blocks.push({ type: 'section', text: mrkdwn(ticketLine(request.ticket)) });
  blocks.push({ type: 'context', elements: [mrkdwn(whoActed(request).join(' · '))] });
  const actions = buttons(request);
  if (actions) blocks.push(actions);
  const text = `${escapeMrkdwn(title(request))}: ${stateLabel(request).replace(/^:[a-z_]+: /, '')} (request ${request.id})`;
  return { text, blocks };
}

function lastOutcome(request: CloudRequest) {
  return request.outcomes[request.outcomes.length - 1];
}

/** When approved work runs: at its scheduled time, now, or (a freeze holding it: its own reply says) not yet. */
function whenItRuns(request: CloudRequest): string {
  if (request.state === 'frozen') return '';
  return request.runAt ? ` It runs ${slackDate(new Date(request.runAt))}.` : ' Queued to run now.';
}

/** What a reply may need beside the request: the outcome it reports and the run's steps. */
interface ReplyFacts {
  outcome: CloudRequest['outcomes'][number] | undefined;
  steps: ResizeSteps;
  step?: number;
}
type ResizeSteps = Extract<CloudRequest['params'], { kind: 'resize' }>['steps'] | [];
type Reply = { text: string; blocks?: KnownBlock[] };
type LeaseEvent = 'lease_offer' | 'lease_reminder' | 'lease_kept' | 'lease_returned';

/** The reply to each event of a request's life but a lease's (lease.ts words those), one entry per event. */
const REPLIES: {
  [E in Exclude<ReplyEvent, LeaseEvent>]: (request: CloudRequest, facts: ReplyFacts) => Reply;
} = {
  approved: (request) => ({
    text: `Approved by ${inWords(approverWords(request)) || mention('unknown')}.${whenItRuns(request)}`,
  }),
  frozen: (request) => {
    const until = request.frozenUntil ? slackDate(new Date(request.frozenUntil)) : 'its end';
    return {
      text: `A freeze holds ${escapeMrkdwn(request.projectName)}${request.freezeReason ? ` (${escapeMrkdwn(request.freezeReason)})` : ''}: it runs when the freeze ends, ${until}, after the rules are checked again. Nothing was sent to the API yet.`,
    };
  },
  unfrozen: () => ({
    text: 'The freeze has ended: queued to run now; the rules are checked again before anything is sent.',
  }),
  break_glass: (request) => ({
    text: `:rotating_light: ${request.breakGlass ? breakerWords(request.breakGlass) : mention('unknown')} runs this now, during the freeze (break glass), saying:\n${quoted(request.breakGlass?.reason ?? '')}`,
  }),
  reminder: (request) => {
    const who = stillToApprove(request);
    const needed = Math.max(1, request.requiredApprovals ?? 1) - approvedBy(request).length;
    return {
      text: `Reminder: this request still needs ${approvalsText(needed)}${who.length > 0 ? ` from ${listed(who)}` : ''}. It expires ${slackDate(new Date(request.expiresAt))}.`,
    };
  },
  escalated: (request) => ({
    text: `Escalated: nobody has decided yet and this request expires ${slackDate(new Date(request.expiresAt))}. ${listed(request.escalateTo ?? [])} may approve it now.`,
  }),
  rejected: (request) => ({
    text: `Rejected by ${mention(request.rejectedBy ?? 'unknown')}. Nothing was sent to the API.${request.rejectReason ? `\n${quoted(request.rejectReason)}` : ''}`,
  }),
  expired: () => ({
    text: 'Expired without an approval. Nothing was sent to the API; make a new request if it is still needed.',
  }),
  cancelled: (request) => ({
    text: `Cancelled by ${actorText(request.cancelledBy ?? request.requester)}. Nothing was sent to the API.`,
  }),
  step_succeeded: (_request, { outcome, steps, step }) => {
    const s = steps[step ?? 0];
    return {
      text: `Step ${(step ?? 0) + 1} of ${steps.length} done (${s ? escapeMrkdwn(stepSummary(s)) : 'step'}): ${escapeMrkdwn(outcome?.message || 'accepted')}`,
    };
  },
  succeeded: (request, { outcome }) =>
    request.params.kind === 'restore'
      ? {
          text: `:white_check_mark: Restore started: ${escapeMrkdwn(outcome?.message || 'accepted')} Task id: \`${escapeMrkdwn(outcome?.taskId ?? 'not given')}\`.`,
        }
      : {
          text: `:white_check_mark: Done: ${escapeMrkdwn(outcome?.message || 'the API accepted the change.')}`,
        },
  refused: (_request, { outcome, steps }) => {
    if (outcome?.notSent) return { text: `:x: ${escapeMrkdwn(outcome.reason ?? 'Not sent.')}` };
    const applied =
      steps.length > 1 && (outcome?.step ?? 0) > 0
        ? ' Step 1 (WAN off) was applied; the VM has WAN off now.'
        : '';
    return {
      text: `:x: The API refused this: ${escapeMrkdwn(outcome?.reason ?? 'no reason given.')}${applied}`,
    };
  },
  unknown: (request, { outcome }) => unknownReply(request, outcome),
  resolved: (request) => ({
    text: `${mention(request.resolvedBy ?? 'unknown')} checked the portal: ${request.state === 'resolved_done' ? 'the change was applied.' : 'the change was not applied.'}`,
  }),
};

/** An outcome no one knows: what to check in the portal, and the two buttons that say what was found. */
function unknownReply(request: CloudRequest, outcome: ReplyFacts['outcome']): Reply {
  const what =
    request.params.kind === 'restore'
      ? `whether a restore of VM ${request.vmid} from \`${escapeMrkdwn(request.params.backupSlug)}\` started`
      : `the size and WAN mode of VM ${request.vmid}`;
  const text = `:warning: Outcome unknown: ${escapeMrkdwn(outcome?.reason ?? 'no answer came back.')} The request was sent and may have been applied, so it will not be sent again. Check ${what} in the portal (project ${escapeMrkdwn(request.projectName)}), then mark what you found.`;
  return {
    text,
    blocks: [
      { type: 'section', text: mrkdwn(text) },
      {
        type: 'actions',
        block_id: `resolve:${request.id}`,
        elements: [
          {
            type: 'button',
            action_id: ACTIONS.resolveDone,
            text: plain('It was applied', 75),
            value: request.id,
            style: 'primary',
          },
          {
            type: 'button',
            action_id: ACTIONS.resolveFailed,
            text: plain('It was not applied', 75),
            value: request.id,
          },
        ],
      },
    ],
  };
}

/** One thread reply for a state change. */
function threadReply(request: CloudRequest, event: ReplyEvent, step?: number): Reply {
  switch (event) {
    case 'lease_offer':
    case 'lease_reminder':
    case 'lease_kept':
    case 'lease_returned':
      return leaseReply(request, event, step);
    default: {
      const outcome =
        step === undefined ? lastOutcome(request) : request.outcomes.find((o) => o.step === step);
      const steps = request.params.kind === 'resize' ? request.params.steps : [];
      return REPLIES[event](request, { outcome, steps, step });
    }
  }
}

/** The renderer the notify worker uses; rendering is pure, from the stored request alone. */
/** Why Slack refused the request message, and what the requester can do about it. */
function refusalHelp(channel: string, project: string, error: string): { why: string; todo: string } {
  const where = `<#${channel}>`;
  const rebind = `or ask an admin to bind project ${escapeMrkdwn(project)} to another channel in the policy file`;
  switch (error) {
    case 'not_in_channel':
      return {
        why: `cloudops is not a member of ${where}`,
        todo: `Invite @cloudops to ${where} (type \`/invite @cloudops\` there), then make the request again.`,
      };
    case 'channel_not_found':
      return {
        why: `cloudops cannot see ${where} (a private channel it was not invited to, or a deleted one)`,
        todo: `Invite @cloudops to ${where} (\`/invite @cloudops\`) ${rebind}, then make the request again.`,
      };
    case 'is_archived':
      return {
        why: `${where} is archived`,
        todo: `Unarchive ${where} ${rebind}, then make the request again.`,
      };
    default:
      return {
        why: `Slack refused it (\`${escapeMrkdwn(error)}\`)`,
        todo: `Ask a workspace admin to check that @cloudops may post in ${where}, then make the request again.`,
      };
  }
}

function messageRefused(request: CloudRequest, error: string): { text: string } {
  const { why, todo } = refusalHelp(request.channel, request.projectName, error);
  const state =
    request.state === 'cancelled'
      ? 'It was cancelled; nothing was sent to the API.'
      : 'It needs no approval and had already started: its outcome comes to you here.';
  return {
    text: `:warning: ${escapeMrkdwn(title(request))} (request ${request.id}) could not be posted in <#${request.channel}>: ${why}. ${state} ${todo}`,
  };
}

export function createRequestRenderer(): RequestRenderer {
  return { requestMessage, threadReply, messageRefused };
}
