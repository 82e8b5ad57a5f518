/**
 * The note a run leaves on its change ticket (docs/policy.md#change-tickets): the outcome and the thread's link, from
 * the notify worker, once the run ended. The ticket's re-check before the POST is requests/tickets.ts's.
 */
import { UnrecoverableError } from 'bullmq';
import type { CloudRequest } from '../requests/model/types.ts';
import { ticketNoteText } from '../requests/tickets.ts';
import { TicketError, TicketUnreachableError } from '../tickets/errors.ts';
import type { ExecutionDeps } from './deps.ts';

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
