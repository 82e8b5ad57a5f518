import type { TicketFacts } from '../../tickets/types.ts';
import { escapeMrkdwn } from './text.ts';

/**
 * The request message's line for its change ticket: a link to it, its state and, for ServiceNow, its window, as
 * the ticket system answered when the request was made.
 */
export function ticketLine(ticket: TicketFacts): string {
  const label = escapeMrkdwn(ticket.key);
  // The URL is built by the ticket client from the configured base and a checked key; a stray `|` or `>` never ends the link.
  const url = /^https?:\/\//.test(ticket.url) ? ticket.url.replace(/[|>]/g, encodeURIComponent) : undefined;
  const link = url ? `<${url}|${label}>` : label;
  const window =
    ticket.window?.start && ticket.window.end
      ? ` · window ${utc(ticket.window.start)} to ${utc(ticket.window.end)}`
      : '';
  return `*Change ticket:* ${link} (${escapeMrkdwn(ticket.state.slice(0, 100))})${window}`;
}

function utc(iso: string): string {
  return `${iso.slice(0, 16).replace('T', ' ')} UTC`;
}
