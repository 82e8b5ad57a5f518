/**
 * The change-ticket checks (docs/configuration.md#change-tickets), run when the policy names a ticket system or the
 * environment configures one: the system's URL is set where the policy needs it, and its credentials read (Jira's
 * current user, one ServiceNow change request), through the outbound proxy as the bot's calls go.
 */
import type { Env } from '../config/env.ts';
import { type Policy, ticketSystemsOf } from '../config/policy.ts';
import { fieldOf } from '../config/policy-problems.ts';
import { unmetTicketSystem } from '../config/ticket-env.ts';
import { TicketError, TicketUnauthorisedError } from '../tickets/errors.ts';
import { ticketSystemsFrom } from '../tickets/from-env.ts';
import type { TicketSystemName } from '../tickets/types.ts';
import { type CheckResult, fail, ok } from './report.ts';

/** Each read's limit. */
export const TICKET_CHECK_MS = 5_000;

const LABEL: Record<TicketSystemName, string> = { jira: 'Jira', servicenow: 'ServiceNow' };
const CREDENTIALS: Record<TicketSystemName, string> = {
  jira: 'JIRA_EMAIL and JIRA_API_TOKEN (Jira Cloud) or JIRA_TOKEN (Data Center)',
  servicenow: 'SERVICENOW_USER and SERVICENOW_PASSWORD',
};

/** One check per system in use, each with the URL its calls went to (for the proxy mark). */
export async function checkTickets(
  env: Env,
  policy: Policy | undefined,
): Promise<{ check: CheckResult; url?: string }[]> {
  const results: { check: CheckResult; url?: string }[] = [];
  const unmet = policy && unmetTicketSystem(env, policy);
  if (unmet)
    results.push({
      check: fail(
        'tickets.environment',
        `change tickets: ${fieldOf(unmet.path)}: ${unmet.words}`,
        'set the variables of docs/configuration.md#change-tickets, or remove change_ticket from the policy',
      ),
    });
  const systems = ticketSystemsFrom(env, {
    connectMs: 3_000,
    headersMs: TICKET_CHECK_MS,
    bodyMs: TICKET_CHECK_MS,
    totalMs: TICKET_CHECK_MS,
  });
  const inPolicy = new Set(policy ? ticketSystemsOf(policy) : []);
  for (const name of ['jira', 'servicenow'] as const) {
    const system = systems[name];
    if (!system) continue;
    const url = name === 'jira' ? env.JIRA_URL : env.SERVICENOW_URL;
    try {
      const who = await system.whoAmI({ timeoutMs: TICKET_CHECK_MS });
      const used = inPolicy.has(name) ? '' : ' (configured, but no change_ticket in the policy names it)';
      results.push({
        check: ok(`tickets.${name}`, `${LABEL[name]}: the credentials read, as ${who}${used}`),
        url,
      });
    } catch (error) {
      if (!(error instanceof TicketError)) throw error;
      const fix =
        error instanceof TicketUnauthorisedError
          ? `check ${CREDENTIALS[name]}, and that the account may read ${name === 'jira' ? 'issues' : 'change_request'}`
          : `check that ${name === 'jira' ? 'JIRA_URL' : 'SERVICENOW_URL'} is reachable from here (and the proxy, if any)`;
      results.push({
        check: fail(
          `tickets.${name}`,
          `${LABEL[name]}: ${error.reason.replace(/, so the credentials could not be checked\.$/, '')}`,
          fix,
        ),
        url,
      });
    } finally {
      await system.close();
    }
  }
  return results;
}
