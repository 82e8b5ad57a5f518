import type { Env } from '../config/env.ts';
import type { ProxyEnv } from '../config/outbound.ts';
import { TicketDesk } from './desk.ts';
import type { TicketTimeouts } from './http.ts';
import { JiraClient } from './jira.ts';
import { ServiceNowClient } from './servicenow.ts';
import type { TicketSystem, TicketSystemName } from './types.ts';

type TicketEnv = Pick<
  Env,
  | 'JIRA_URL'
  | 'JIRA_EMAIL'
  | 'JIRA_API_TOKEN'
  | 'JIRA_TOKEN'
  | 'SERVICENOW_URL'
  | 'SERVICENOW_USER'
  | 'SERVICENOW_PASSWORD'
> &
  ProxyEnv;

/** The ticket systems `env` configures (each by its URL), as clients through the outbound proxy. */
export function ticketSystemsFrom(
  env: TicketEnv,
  timeouts?: TicketTimeouts,
): Partial<Record<TicketSystemName, TicketSystem>> {
  const proxy: ProxyEnv = {
    HTTPS_PROXY: env.HTTPS_PROXY,
    HTTP_PROXY: env.HTTP_PROXY,
    NO_PROXY: env.NO_PROXY,
  };
  const systems: Partial<Record<TicketSystemName, TicketSystem>> = {};
  if (env.JIRA_URL)
    systems.jira = new JiraClient({
      baseUrl: env.JIRA_URL,
      auth: env.JIRA_TOKEN
        ? { kind: 'datacenter', token: env.JIRA_TOKEN }
        : env.JIRA_EMAIL && env.JIRA_API_TOKEN
          ? { kind: 'cloud', email: env.JIRA_EMAIL, apiToken: env.JIRA_API_TOKEN }
          : { kind: 'none' },
      proxy,
      timeouts,
    });
  if (env.SERVICENOW_URL)
    systems.servicenow = new ServiceNowClient({
      baseUrl: env.SERVICENOW_URL,
      user: env.SERVICENOW_USER,
      password: env.SERVICENOW_PASSWORD,
      proxy,
      timeouts,
    });
  return systems;
}

/** The desk over the systems `env` configures. */
export function ticketDeskFrom(env: TicketEnv, timeouts?: TicketTimeouts): TicketDesk {
  return new TicketDesk(ticketSystemsFrom(env, timeouts));
}
