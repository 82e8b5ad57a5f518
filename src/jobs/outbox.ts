import type { Outbox } from '../requests/outbox.ts';
import { cancelExecution, enqueueExecution, enqueueNotify, type Queues, removeExpireJob } from './queues.ts';

/** The lifecycle's outbox on the bot's BullMQ queues and the due-times set. */
export function createOutbox(queues: Queues, now: () => Date): Outbox {
  const due = queues.due;
  return {
    postRequest: (requestId) => enqueueNotify(queues, { type: 'post-request', requestId }),
    // Delayed until the request's expiry, so the message loses its buttons on time without polling.
    expireAt: (request) =>
      enqueueNotify(
        queues,
        { type: 'expire', requestId: request.id },
        { expiresAt: request.expiresAt, now: now() },
      ),
    execute: (request) => enqueueExecution(queues, request, now()),
    cancelExecution: (requestId) => cancelExecution(queues, requestId),
    async announce(request, reply, step) {
      // A decided request's expire job, reminder and escalation have nothing left to do.
      if (request.state !== 'pending') {
        await removeExpireJob(queues, request.id);
        await due.drop([
          { kind: 'remind', requestId: request.id },
          { kind: 'escalate', requestId: request.id },
        ]);
      }
      await enqueueNotify(queues, { type: 'sync-message', requestId: request.id });
      if (reply)
        await enqueueNotify(queues, { type: 'thread-reply', requestId: request.id, event: reply, step });
    },
    dueAt: (item, at) => due.set(item, at),
    dropDue: (items) => due.drop(items),
  };
}
