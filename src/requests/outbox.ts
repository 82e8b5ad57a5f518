import type { CloudRequest, ReplyEvent } from './model/types.ts';

/** What may fall due for a request: a reminder, an escalation, the end of a freeze. */
export type DueKind = 'remind' | 'escalate' | 'freeze-end' | 'lease';

/** One due item: what, for which request. */
export interface DueItem {
  kind: DueKind;
  requestId: string;
}

/**
 * What the lifecycle asks of the queues, without knowing them: `src/jobs/outbox.ts` implements it with BullMQ.
 * Every method is idempotent (fixed job ids), so a retried decision adds nothing twice.
 */
export interface Outbox {
  /** Post the request message in its channel. */
  postRequest(requestId: string): Promise<void>;
  /** Expire the request at its `expiresAt` if nobody decided by then. */
  expireAt(request: CloudRequest): Promise<void>;
  /** Run a queued request (at its `runAt` when it has one). */
  execute(request: CloudRequest): Promise<void>;
  /** Drop a queued request's job that has not started. */
  cancelExecution(requestId: string): Promise<void>;
  /**
   * Refresh the request message and, when given, reply in its thread; a decided request's expiry, reminder and
   * escalation are dropped.
   */
  announce(request: CloudRequest, reply?: ReplyEvent, step?: number): Promise<void>;
  /** Have `item` fall due at `at` (one sorted set read by the due-times scheduler); a later call moves it. */
  dueAt(item: DueItem, at: Date): Promise<void>;
  /** Drop due items that no longer apply. */
  dropDue(items: DueItem[]): Promise<void>;
}
