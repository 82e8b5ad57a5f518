import type { KnownBlock, ModalView } from '@slack/types';
import type { HomeDigest, HomeRenderer, HomeView } from '../../jobs/renderers.ts';
import { verifyText } from '../../requests/approval/approval-rules.ts';
import type { Inbox } from '../../requests/inbox.ts';
import type { CloudRequest } from '../../requests/model/types.ts';
import { stateLabel, summary, vmLabel } from './describe.ts';
import { leaseButtons, openLeaseLines } from './lease.ts';
import { ACTIONS } from './request-message.ts';
import { escapeMrkdwn, mrkdwn, plain, requesterText, slackDate } from './text.ts';

/** The home view's callback id: Slack echoes it back with clicks made on the App Home. */
export const HOME_CALLBACK_ID = 'cloudops_home';

const verb = (request: CloudRequest) => (request.kind === 'resize' ? 'Resize' : 'Restore');

function costLine(request: CloudRequest): string | undefined {
  const cost = request.cost;
  if (!cost?.diffMonthly) return undefined;
  const diff = cost.diffMonthly.startsWith('-') ? cost.diffMonthly.replace('-', '−') : `+${cost.diffMonthly}`;
  return `${cost.currency} ${diff}/month (${cost.currency} ${cost.monthly}/month after)`;
}

/** One waiting request: what, how much, who asked where, until when; then the channel's own Approve / Reject. */
function waitingBlocks(request: CloudRequest): KnownBlock[] {
  const lines = [
    `*${verb(request)} ${escapeMrkdwn(vmLabel(request))}* · \`${request.id}\``,
    summary(request),
    costLine(request),
    `${request.agent ? 'Asked by' : 'Requested by'} ${requesterText(request)} in <#${request.channel}> ${slackDate(new Date(request.createdAt))} · expires ${slackDate(new Date(request.expiresAt))}`,
    request.verify
      ? `:lock: Needs a verified approval (${verifyText(request.verify)}): Approve sends you a link`
      : undefined,
  ].filter((line): line is string => line !== undefined);
  return [
    { type: 'section', text: mrkdwn(lines.join('\n')) },
    {
      type: 'actions',
      block_id: `home:${request.id}`,
      elements: [
        {
          type: 'button',
          action_id: ACTIONS.approve,
          text: plain('Approve', 75),
          style: 'primary',
          value: request.id,
        },
        {
          type: 'button',
          action_id: ACTIONS.reject,
          text: plain('Reject', 75),
          style: 'danger',
          value: request.id,
        },
      ],
    },
  ];
}

/** A scheduled run the person may cancel, with its Cancel button. */
function scheduledBlock(request: CloudRequest): KnownBlock {
  return {
    type: 'section',
    text: mrkdwn(
      `*${verb(request)} ${escapeMrkdwn(vmLabel(request))}* · \`${request.id}\`\n${summary(request)}\nRuns ${slackDate(new Date(request.runAt ?? request.updatedAt))} · ${request.agent ? 'asked by' : 'requested by'} ${requesterText(request)} in <#${request.channel}>`,
    ),
    accessory: {
      type: 'button',
      action_id: ACTIONS.cancel,
      text: plain('Cancel scheduled run', 75),
      value: request.id,
    },
  };
}

/** One of the person's own requests and its state; still waiting, it can be withdrawn from here. */
function mineBlock(request: CloudRequest): KnownBlock {
  const block: KnownBlock = {
    type: 'section',
    text: mrkdwn(
      `*${verb(request)} ${escapeMrkdwn(vmLabel(request))}* · \`${request.id}\`\n${summary(request)}\n${stateLabel(request)} · in <#${request.channel}> · ${slackDate(new Date(request.updatedAt))}`,
    ),
  };
  if (request.state === 'pending') {
    block.accessory = {
      type: 'button',
      action_id: ACTIONS.cancel,
      text: plain('Cancel request', 75),
      value: request.id,
    };
  }
  return block;
}

const heading = (text: string): KnownBlock => ({ type: 'section', text: mrkdwn(text) });
const note = (text: string): KnownBlock => ({ type: 'context', elements: [mrkdwn(text)] });

/** One open lease: until when (or overdue since), what it returns to, its cost so far; the offer's own buttons. */
function leaseBlocks(request: CloudRequest, now: Date): KnownBlock[] {
  const [line] = openLeaseLines([request], now);
  return [
    {
      type: 'section',
      text: mrkdwn(
        `${line ?? `\`${request.id}\``}\n${request.agent ? 'Asked by' : 'Requested by'} ${requesterText(request)} in <#${request.channel}>`,
      ),
    },
    leaseButtons(request),
  ];
}

/**
 * The open leases the person may return or keep, as many as `room` blocks allow (2 each, after a divider, a heading
 * and a closing note); the rest are counted with the channels whose `/cloud jobs` lists them.
 */
function leasesSection(inbox: Inbox, now: Date, room: number): KnownBlock[] {
  const leases = inbox.leases ?? [];
  const more = inbox.moreLeases ?? { count: 0, channels: [] };
  const total = leases.length + more.count;
  if (total === 0 || room < 3) return [];
  const shown = leases.slice(0, Math.max(0, Math.floor((room - 3) / 2)));
  const hidden = leases.slice(shown.length);
  const blocks: KnownBlock[] = [
    { type: 'divider' },
    heading(`*Temporary sizes you may return or keep* (${total}, the earliest end first)`),
    ...shown.flatMap((r) => leaseBlocks(r, now)),
  ];
  if (hidden.length + more.count > 0) {
    const channels = new Set([...hidden.map((r) => r.channel), ...more.channels]);
    const where = [...channels].map((c) => `<#${c}>`).join(', ');
    blocks.push(note(`…and ${hidden.length + more.count} more: \`/cloud jobs\` in ${where} lists them.`));
  }
  return blocks;
}

/** Slack's limit on a Home tab's blocks. */
const MAX_HOME_BLOCKS = 100;

/**
 * A person's App Home: what waits for their approval (oldest first, with the same buttons as the channel's request
 * message), the open leases they may return or keep (the lease offer's buttons), scheduled runs they may cancel, and
 * their own recent requests. However much waits, it stays within Slack's 100 blocks: the inbox carries at most 30
 * waiting requests (2 blocks each), the leases get the blocks the rest leaves, and what is left out is counted with
 * where to find it.
 */
export function homeView(inbox: Inbox, now: Date, digests: HomeDigest[] = []): HomeView {
  const blocks: KnownBlock[] = [
    { type: 'header', text: plain('cloudops', 150) },
    note(
      `Requests you can approve, temporary sizes, scheduled runs, and your own requests · updated ${slackDate(now)}`,
    ),
    { type: 'divider' },
  ];
  const waitingCount = inbox.waiting.length + inbox.moreWaiting.count;
  if (waitingCount === 0) {
    blocks.push(heading('*Waiting for your approval*\nNothing is waiting for you.'));
  } else {
    blocks.push(heading(`*Waiting for your approval* (${waitingCount}, oldest first)`));
    for (const request of inbox.waiting) blocks.push(...waitingBlocks(request));
    if (inbox.moreWaiting.count > 0) {
      const where = inbox.moreWaiting.channels.map((c) => `<#${c}>`).join(', ');
      blocks.push(
        note(
          `…and ${inbox.moreWaiting.count} more waiting for you. Approve these first; the others are on their request messages in ${where} (\`/cloud jobs\` there lists them).`,
        ),
      );
    }
  }
  const rest: KnownBlock[] = [];
  if (inbox.scheduled.length > 0) {
    rest.push({ type: 'divider' }, heading('*Scheduled runs you may cancel*'));
    rest.push(...inbox.scheduled.map(scheduledBlock));
    if (inbox.moreScheduled > 0)
      rest.push(note(`…and ${inbox.moreScheduled} more, later: \`/cloud jobs\` in their channels.`));
  }
  rest.push({ type: 'divider' });
  if (inbox.mine.length === 0) {
    rest.push(
      heading('*Your recent requests*\nNone yet: `/cloud resize` or `/cloud restore` in a project channel.'),
    );
  } else {
    rest.push(heading('*Your recent requests*'));
    rest.push(...inbox.mine.map(mineBlock));
  }
  if (digests.length > 0) {
    const lines = digests
      .slice(0, 20)
      .map(
        (d) => `• <#${d.channel}>: ${escapeMrkdwn(d.label)}${d.next ? ` · next ${slackDate(d.next)}` : ''}`,
      );
    rest.push({ type: 'divider' }, heading(`*Pricing digests in your channels*\n${lines.join('\n')}`));
  }
  blocks.push(...leasesSection(inbox, now, MAX_HOME_BLOCKS - blocks.length - rest.length), ...rest);
  return { type: 'home', callback_id: HOME_CALLBACK_ID, blocks };
}

export const homeRenderer: HomeRenderer = { home: homeView };

/** Why a click on the App Home changed nothing: a modal, since a home has no ephemeral messages. */
export function noticeModal(text: string): ModalView {
  return {
    type: 'modal',
    title: plain('cloudops', 24),
    close: plain('OK', 24),
    blocks: [{ type: 'section', text: mrkdwn(text) }],
  };
}

/** The App Home button that DMs the person a link to register a passkey (docs/policy.md#verified-approvals). */
export const PASSKEY_REGISTER = 'passkey_register';

/**
 * The home view with a "Register a passkey" section at its end, where the verification page runs; left out when the
 * view has no room for it within Slack's 100 blocks.
 */
export function withPasskeyButton(renderer: HomeRenderer): HomeRenderer {
  return {
    home(...args) {
      const view = renderer.home(...args);
      if (view.blocks.length > MAX_HOME_BLOCKS - 2) return view;
      const section: KnownBlock = {
        type: 'section',
        text: mrkdwn(
          '*Passkeys*\nApprovals that ask for a verified approval accept a passkey registered here. You get a link by DM.',
        ),
        accessory: { type: 'button', action_id: PASSKEY_REGISTER, text: plain('Register a passkey', 75) },
      };
      return { ...view, blocks: [...view.blocks, { type: 'divider' }, section] };
    },
  };
}
