import type { ApprovalKind, Policy, ProjectPolicy } from '../../config/policy.ts';
import { TICKET_FORM_TIMEOUT_MS, type TicketFacts, ticketRuleFor } from '../../requests/tickets.ts';
import { TicketError } from '../../tickets/errors.ts';
import { FIELDS, type TicketField } from '../blocks/modals.ts';
import type { SlackDeps } from '../deps.ts';

/**
 * The change ticket of a submitted form, checked with its system before the ack (docs/policy.md#change-tickets): its
 * facts for the request, or the field error naming the ticket and why. A form without the Ticket field (opened before
 * the policy asked for one) gets the error on the project.
 */
export async function formTicket(
  deps: SlackDeps,
  project: ProjectPolicy,
  kinds: ApprovalKind[],
  typed: string | undefined,
  blocks: string[],
  runAt?: Date,
): Promise<{ ticket?: TicketFacts } | { errors: Record<string, string> }> {
  try {
    const ticket = await deps.requests.checkTicket(project, kinds, typed, {
      runAt,
      timeoutMs: TICKET_FORM_TIMEOUT_MS,
    });
    return ticket ? { ticket } : {};
  } catch (error) {
    if (!(error instanceof TicketError)) throw error;
    const block = blocks.includes(FIELDS.ticket) ? FIELDS.ticket : FIELDS.project;
    return { errors: { [block]: error.reason } };
  }
}

/**
 * The Ticket field of a form that opens for `project` (when known): shown when the policy asks for change tickets
 * anywhere, with what to give in its hint, prefilled with `ticket=` from the command line.
 */
export function ticketField(
  policy: Policy,
  project: ProjectPolicy | undefined,
  kinds: ApprovalKind[],
  initial: string | undefined,
): TicketField | undefined {
  const anyRule = policy.change_ticket !== undefined || policy.projects.some((p) => p.change_ticket);
  if (!anyRule) return undefined;
  const rule = project ? ticketRuleFor(policy, project, kinds) : undefined;
  if (!rule)
    return {
      initial,
      hint: project
        ? 'This project’s policy asks for no ticket for this change; one given is checked all the same.'
        : 'If the project’s policy asks for one: a Jira issue key such as OPS-123, or a ServiceNow change number such as CHG0030001.',
    };
  const what =
    rule.system === 'jira'
      ? 'a Jira issue key such as OPS-123'
      : 'a ServiceNow change number such as CHG0030001';
  const window = rule.system === 'servicenow' ? ', whose planned window holds the run' : '';
  return {
    initial,
    hint: `${rule.required ? 'Required' : 'Optional'}: ${what}, in ${rule.states.join(' or ')}${window}.`,
  };
}
