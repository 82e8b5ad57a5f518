/** The change-ticket variables as the environment schema parsed them (docs/configuration.md#change-tickets). */
export interface TicketVariables {
  JIRA_URL?: string | undefined;
  JIRA_EMAIL?: string | undefined;
  JIRA_API_TOKEN?: string | undefined;
  JIRA_TOKEN?: string | undefined;
  SERVICENOW_URL?: string | undefined;
  SERVICENOW_USER?: string | undefined;
  SERVICENOW_PASSWORD?: string | undefined;
}

/** The change-ticket variables that make no whole configuration (docs/configuration.md#change-tickets). */
export function ticketProblems(data: TicketVariables): string[] {
  const problems: string[] = [];
  const cloud = data.JIRA_EMAIL !== undefined || data.JIRA_API_TOKEN !== undefined;
  if (data.JIRA_EMAIL !== undefined && data.JIRA_API_TOKEN === undefined)
    problems.push(
      "JIRA_EMAIL: set without JIRA_API_TOKEN; Jira Cloud needs the account's email and an API token",
    );
  if (data.JIRA_API_TOKEN !== undefined && data.JIRA_EMAIL === undefined)
    problems.push(
      "JIRA_API_TOKEN: set without JIRA_EMAIL; Jira Cloud needs the account's email and an API token",
    );
  if (cloud && data.JIRA_TOKEN !== undefined)
    problems.push(
      'JIRA_TOKEN: set together with JIRA_API_TOKEN; give JIRA_EMAIL and JIRA_API_TOKEN for Jira Cloud, or JIRA_TOKEN for Data Center',
    );
  if ((cloud || data.JIRA_TOKEN !== undefined) && data.JIRA_URL === undefined)
    problems.push(
      'JIRA_URL: not set, but Jira credentials are; give the Jira site, e.g. https://example.atlassian.net',
    );
  if (data.JIRA_URL !== undefined && !cloud && data.JIRA_TOKEN === undefined)
    problems.push(
      'JIRA_URL: set without credentials; give JIRA_EMAIL and JIRA_API_TOKEN (Jira Cloud) or JIRA_TOKEN (Data Center)',
    );
  const sn = (['SERVICENOW_URL', 'SERVICENOW_USER', 'SERVICENOW_PASSWORD'] as const).filter(
    (n) => data[n] !== undefined,
  );
  if (sn.length > 0 && sn.length < 3)
    problems.push(
      `${sn[0]}: set without ${(['SERVICENOW_URL', 'SERVICENOW_USER', 'SERVICENOW_PASSWORD'] as const).filter((n) => !sn.includes(n)).join(' and ')}; ServiceNow needs all three`,
    );
  return problems;
}
