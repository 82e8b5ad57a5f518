import type { KnownBlock } from '@slack/types';
import type { CloudRequest } from '../../requests/model/types.ts';
import { stateLabel, summary, vmLabel } from './describe.ts';
import { openLeaseLines } from './lease.ts';
import { actorText, escapeMrkdwn, mention, mrkdwn, requesterText, slackDate } from './text.ts';

function actors(request: CloudRequest): string {
  const parts = [`by ${requesterText(request)}`];
  if (request.approvedBy) parts.push(`approved by ${mention(request.approvedBy)}`);
  if (request.rejectedBy) parts.push(`rejected by ${mention(request.rejectedBy)}`);
  if (request.cancelledBy) parts.push(`cancelled by ${actorText(request.cancelledBy)}`);
  if (request.resolvedBy) parts.push(`checked by ${mention(request.resolvedBy)}`);
  return parts.join(', ');
}

/**
 * `/cloud jobs`: the channel's open leases first (overdue ones on top), then one section per recent request, newest
 * first, inside Slack's 50-block limit.
 */
export function jobsBlocks(
  requests: CloudRequest[],
  leases?: { open: CloudRequest[]; now: Date },
): { text: string; blocks: KnownBlock[] } {
  const leaseBlocks: KnownBlock[] =
    leases && leases.open.length > 0
      ? [
          {
            type: 'section',
            text: mrkdwn(
              `*Open leases in this channel* (${leases.open.length})\n${openLeaseLines(leases.open, leases.now).join('\n')}`,
            ),
          },
        ]
      : [];
  if (requests.length === 0 && leaseBlocks.length === 0) {
    return {
      text: 'No requests in this channel yet.',
      blocks: [{ type: 'section', text: mrkdwn('No requests in this channel yet.') }],
    };
  }
  const blocks: KnownBlock[] = [
    ...leaseBlocks,
    { type: 'section', text: mrkdwn(`*Recent requests in this channel* (${requests.length})`) },
  ];
  for (const request of requests.slice(0, 40)) {
    blocks.push({
      type: 'section',
      text: mrkdwn(
        `\`${request.id}\` *${escapeMrkdwn(vmLabel(request))}*: ${summary(request)}\n${stateLabel(request)} · ${actors(request)} · ${slackDate(new Date(request.updatedAt))}`,
      ),
    });
  }
  const open = leases && leases.open.length > 0 ? `Open leases: ${leases.open.length}. ` : '';
  return { text: `${open}Recent requests in this channel: ${requests.length}`, blocks };
}
