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
      // One notify job per announcement: a reply comes as a `report` (its thread reply once, then the message synced).
      const notify = reply
        ? enqueueNotify(queues, { type: 'report', requestId: request.id, event: reply, step })
        : enqueueNotify(queues, { type: 'sync-message', requestId: request.id });
      // A decided request's expire job, reminder and escalation have nothing left to do. None of the three writes
      // depends on another, so they go out together (one round trip on the auto-pipelined queue connection).
      if (request.state === 'pending') return notify;
      await Promise.all([
        removeExpireJob(queues, request.id),
        due.drop([
          { kind: 'remind', requestId: request.id },
          { kind: 'escalate', requestId: request.id },
        ]),
        notify,
      ]);
    },
    dueAt: (item, at) => due.set(item, at),
    dropDue: (items) => due.drop(items),
  };
}
