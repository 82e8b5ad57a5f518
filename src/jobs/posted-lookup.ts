/**
 * Finding a message Slack accepted although the worker never learned it (its answer lost, or later than the client's
 * deadline, or the process killed in between): each message the bot may post twice carries metadata naming it, and
 * a retry reads the place it went to before posting again.
 */
import type { ThreadMessage } from '../slack-api/client.ts';

/** The metadata `event_type` of every thread reply, with the reply's id in `event_payload.reply_id`. */
export const REPLY_EVENT_TYPE = 'cloudops_reply';
/** The metadata `event_type` of every request message, with the request's id in `event_payload.request_id`. */
export const REQUEST_EVENT_TYPE = 'cloudops_request';
/** How many pages are read (a thread is a few messages; a channel's messages since the request's creation, a few). */
const LOOKUP_PAGES = 5;

/** One page of messages, as conversations.replies and conversations.history answer. */
export interface MessagePage {
  messages?: ThreadMessage[];
  response_metadata?: { next_cursor?: string };
}

/** Whether `message` carries metadata of `eventType` whose payload's `field` is `id`. */
export function carries(message: ThreadMessage, eventType: string, field: string, id: string): boolean {
  return (
    message.metadata?.event_type === eventType &&
    (message.metadata.event_payload as Record<string, unknown> | undefined)?.[field] === id
  );
}

/**
 * The ts of the first message `matches` accepts, reading pages with `read` (given the cursor) until one has it or
 * none is left; undefined when none has it. A failed read throws, for the caller to decide.
 */
export async function findPosted(
  read: (cursor: string | undefined) => Promise<MessagePage>,
  matches: (message: ThreadMessage) => boolean,
): Promise<string | undefined> {
  let cursor: string | undefined;
  for (let page = 0; page < LOOKUP_PAGES; page++) {
    const answer = await read(cursor);
    const found = answer.messages?.find(matches);
    if (found?.ts) return found.ts;
    cursor = answer.response_metadata?.next_cursor || undefined;
    if (!cursor) return undefined;
  }
  return undefined;
}
