import type { CloudRequest, ReplyEvent } from './types.ts';

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
  /** Refresh the request message and, when given, reply in its thread; a decided request's expiry is dropped. */
  announce(request: CloudRequest, reply?: ReplyEvent): Promise<void>;
}
