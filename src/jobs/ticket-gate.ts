/**
 * The change ticket's part of a run (docs/policy.md#change-tickets): read again right before the POST, and a note on
 * it after the run. Kept apart from the execute worker's other checks, each a call of its own.
 */
import { UnrecoverableError } from 'bullmq';
import { recheckTicket, resizeKinds, ticketNoteText } from '../requests/tickets.ts';
import type { CloudRequest } from '../requests/types.ts';
import { TicketError, TicketUnreachableError } from '../tickets/errors.ts';
import type { ExecutionDeps } from './deps.ts';
import { truncateDetail } from './run-steps.ts';
import type { SendMarkers } from './send-markers.ts';

/** A run its ticket holds (the system did not answer, or its window opens later): the job looks again at `at`. */
export class TicketHoldError extends Error {
  override readonly name = 'TicketHoldError';
  readonly code = 'TICKET_HOLD';
  constructor(
    readonly at: Date,
    reason: string,
  ) {
    super(reason);
  }
}

/**
 * The ticket's verdict right before the POST: undefined to send, the reason to refuse (nothing sent), or a
 * {@link TicketHoldError} thrown to wait. A run with no ticket and no rule asking for one reads nothing.
 */
export async function ticketVerdict(deps: ExecutionDeps, request: CloudRequest): Promise<string | undefined> {
  const anyRule =
    deps.policy.change_ticket !== undefined || deps.policy.projects.some((p) => p.change_ticket);
  if (!request.ticket && !anyRule) return undefined;
  const { params } = request;
  const kinds =
    params.kind === 'restore' ? (['restore'] as const) : resizeKinds(params.before, params.target);
  const decided = await recheckTicket(deps, request, [...kinds]);
  if (decided.next === 'send') return undefined;
  if (decided.next === 'refuse') return decided.reason;
  throw new TicketHoldError(decided.at, decided.reason);
}

/** A run the lock's script had already moved to sending goes back to queued, its first marker cleared: nothing left. */
export async function holdStartedRun(
  deps: ExecutionDeps,
  markers: SendMarkers,
  request: CloudRequest,
  hold: TicketHoldError,
): Promise<void> {
  await markers.clear(request.id, request.nextStep);
  const detail = `held by the change ticket: ${hold.message} Looks again at ${hold.at.toISOString()}.`;
  await deps.store.transition(
    request.id,
    {
      from: ['sending'],
      to: 'queued',
      actor: 'cloudops',
      detail: truncateDetail(detail),
    },
    request,
  );
}

/**
 * Leaves the run's outcome on the request's ticket, with a link to its Slack thread, at most once: the record is set
 * first. A ticket system that cannot be reached is retried (the record goes again); one that refuses is logged.
 */
export async function noteOnTicket(
  deps: ExecutionDeps,
  request: CloudRequest,
): Promise<'noted' | 'duplicate' | 'skipped'> {
  const { ticket } = request;
  if (!ticket || !deps.tickets) return 'skipped';
  const records = deps.records ?? deps.connection;
  const key = `${deps.prefix}:ticket-noted:${request.id}`;
  if ((await records.set(key, '1', 'EX', 3 * 24 * 3600, 'NX')) !== 'OK') return 'duplicate';
  let link: { url: string; label: string } | undefined;
  if (request.messageTs) {
    try {
      const answer = await deps.slack.chat.getPermalink({
        channel: request.channel,
        message_ts: request.messageTs,
      });
      link = { url: answer.permalink, label: 'Slack thread' };
    } catch (error) {
      deps.logger.warn(
        { err: error, requestId: request.id },
        'no permalink for the ticket note; noted without it',
      );
    }
  }
  try {
    await deps.tickets.note(ticket, { text: ticketNoteText(request), ...(link ? { link } : {}) });
    return 'noted';
  } catch (error) {
    if (!(error instanceof TicketError)) throw error;
    if (error instanceof TicketUnreachableError) {
      await records.del(key);
      throw error;
    }
    deps.logger.warn({ requestId: request.id, code: error.code }, 'the ticket system refused the note');
    throw new UnrecoverableError(error.reason);
  }
}
