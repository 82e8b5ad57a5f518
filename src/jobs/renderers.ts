import type { KnownBlock } from '@slack/types';
import type { Cluster } from '../cloud/types.ts';
import type { Policy } from '../config/policy.ts';
import type { DigestDiff } from '../pricing/diff.ts';
import type { Inbox } from '../requests/inbox.ts';
import type { CloudRequest, ReplyEvent } from '../requests/model/types.ts';

/**
 * How the workers turn what happened into Slack messages. The Block Kit builders live in `src/slack/blocks/`;
 * `main.ts` hands them to the workers through these interfaces, so nothing in `src/jobs/` imports `src/slack/`.
 */

/** One message as the workers post it. */
export interface RenderedMessage {
  text: string;
  blocks: KnownBlock[];
}

export interface RequestRenderer {
  requestMessage(request: CloudRequest): RenderedMessage;
  threadReply(
    request: CloudRequest,
    event: ReplyEvent,
    step?: number,
  ): { text: string; blocks?: KnownBlock[] };
  /** To the requester directly: Slack refused the request message with `error`, why, and what to do. */
  messageRefused(request: CloudRequest, error: string): { text: string };
}

export interface DigestRenderer {
  /** A channel's digest: the clusters now and what changed since its last one, in parts Slack accepts. */
  digest(input: { clusters: Cluster[]; diff: DigestDiff; policy: Policy; at: Date }): RenderedMessage[];
  /** The notice posted instead when the API could not be read, with when the next digest runs. */
  failure(reason: string, next: Date | undefined): RenderedMessage;
}

/** A Home tab view as views.publish takes it. */
export interface HomeView {
  type: 'home';
  callback_id: string;
  blocks: KnownBlock[];
}

/** A channel's pricing digest subscription, as a home lists it. */
export interface HomeDigest {
  channel: string;
  label: string;
  next?: Date;
}

export interface HomeRenderer {
  /** A person's App Home from their inbox and the digests of the channels it names, at `now`. */
  home(inbox: Inbox, now: Date, digests?: HomeDigest[]): HomeView;
}
