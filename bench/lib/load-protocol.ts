import type { SlackIdentity } from './slack-request.ts';

/** How requests are spread in time: a fixed rate for a duration, or all at once. */
export type LoadShape =
  | { type: 'rate'; perSecond: number; durationMs: number }
  | { type: 'burst'; count: number };

/**
 * What to send: signed `/cloud <text>` commands, clicks on `actionId` carrying one of `values` each, or ready form
 * bodies (one per request, signed as they are sent).
 */
export type LoadRequestKind =
  | { type: 'command'; text: string }
  | { type: 'action'; actionId: string; values: string[] }
  | { type: 'form'; bodies: string[] };

/** One load run, sent from the bench to the load child over IPC. */
export interface LoadJob {
  id: number;
  /** Full URL of the receiver, e.g. http://127.0.0.1:PORT/slack/events. */
  url: string;
  secret: string;
  who: SlackIdentity;
  kind: LoadRequestKind;
  shape: LoadShape;
  /** Sockets in the client pool. */
  connections: number;
  /** Give up on one request after this long (it counts as an error). */
  timeoutMs: number;
}

/** What the load child reports for one run. */
export interface LoadResult {
  id: number;
  /** Client-side latency of each answered request, send → full response read, ms. */
  latencies: number[];
  errors: number;
  statuses: Record<string, number>;
  /** First error message seen, for diagnosis. */
  firstError?: string;
  elapsedMs: number;
  /** When each request was sent, by index (epoch ms, sub-millisecond). */
  sentAtMs: number[];
  /** Worst delay between a request's planned and actual send time: shows whether the generator kept up. */
  maxSendLagMs: number;
}
