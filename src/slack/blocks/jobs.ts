import type { KnownBlock } from '@slack/types';
import type { CloudRequest } from '../../requests/types.ts';
import { STATE_LABEL, summary, vmLabel } from './describe.ts';
import { escapeMrkdwn, mention, mrkdwn, slackDate } from './text.ts';

function actors(request: CloudRequest): string {
  const parts = [`by ${mention(request.requester)}`];
  if (request.approvedBy) parts.push(`approved by ${mention(request.approvedBy)}`);
  if (request.rejectedBy) parts.push(`rejected by ${mention(request.rejectedBy)}`);
  if (request.cancelledBy) parts.push(`cancelled by ${mention(request.cancelledBy)}`);
  if (request.resolvedBy) parts.push(`checked by ${mention(request.resolvedBy)}`);
  return parts.join(', ');
}

/** `/cloud jobs`: one section per recent request, newest first, inside Slack's 50-block limit. */
export function jobsBlocks(requests: CloudRequest[]): { text: string; blocks: KnownBlock[] } {
  if (requests.length === 0) {
    return {
      text: 'No requests in this channel yet.',
      blocks: [{ type: 'section', text: mrkdwn('No requests in this channel yet.') }],
    };
  }
  const blocks: KnownBlock[] = [
    { type: 'section', text: mrkdwn(`*Recent requests in this channel* (${requests.length})`) },
  ];
  for (const request of requests.slice(0, 40)) {
    blocks.push({
      type: 'section',
      text: mrkdwn(
        `\`${request.id}\` *${escapeMrkdwn(vmLabel(request))}*: ${summary(request)}\n${STATE_LABEL[request.state]} · ${actors(request)} · ${slackDate(new Date(request.updatedAt))}`,
      ),
    });
  }
  return { text: `Recent requests in this channel: ${requests.length}`, blocks };
}
