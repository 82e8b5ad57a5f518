import type { KnownBlock } from '@slack/types';
import type { TicketFacts } from '../../tickets/types.ts';
import { escapeMrkdwn } from './text.ts';

/** The Ticket field's block and action id in the resize and restore forms. */
export const TICKET_BLOCK = 'ticket';
/** The longest ticket key the field takes: a Jira key or a ServiceNow number is far shorter. */
export const TICKET_MAX_LENGTH = 64;

/** The Ticket field, shown when the policy asks for change tickets (docs/policy.md#change-tickets). */
export interface TicketField {
  /** `ticket=` on the command line. */
  initial?: string;
  /** What to give, e.g. "Required: a Jira issue key such as OPS-123, in Approved." */
  hint: string;
}

/** The form's Ticket input, or nothing when the policy asks for no tickets. */
export function ticketInput(field: TicketField | undefined): KnownBlock[] {
  if (!field) return [];
  return [
    {
      type: 'input',
      block_id: TICKET_BLOCK,
      optional: true,
      label: { type: 'plain_text', text: 'Change ticket' },
      hint: { type: 'plain_text', text: field.hint.slice(0, 2000) },
      element: {
        type: 'plain_text_input',
        action_id: TICKET_BLOCK,
        ...(field.initial !== undefined ? { initial_value: field.initial } : {}),
        placeholder: { type: 'plain_text', text: 'e.g. OPS-123 or CHG0030001' },
        max_length: TICKET_MAX_LENGTH,
      },
    },
  ];
}

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
