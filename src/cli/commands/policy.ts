import {
  approvalsOf,
  changeTicketOf,
  loadPolicyFile,
  type Policy,
  PolicyError,
  type ProjectPolicy,
  userGroupsOf,
} from '../../config/policy.ts';
import { fieldOf } from '../../config/policy-problems.ts';
import { unmetTicketSystem } from '../../config/ticket-env.ts';
import type { VerifyMethod } from '../../config/verification-policy.ts';
import { unmetVerify, unmetWords } from '../../config/verification-uses.ts';
import { createLogger } from '../../observability/logger.ts';
import { describeRule, verifyText } from '../../requests/approval/approval-rules.ts';
import { createUserGroups } from '../../slack/user-groups.ts';
import { SlackApi } from '../../slack-api/client.ts';
import { type CliIo, write } from '../io.ts';

/**
 * `cloudops policy check [file] [--json]`: validates a policy file; every problem (up to 20) is named with
 * file:line:field.
 */
export async function policyCheckCommand(
  io: CliIo,
  file: string | undefined,
  json: boolean,
): Promise<number> {
  const path = file ?? io.env.POLICY_FILE;
  let policy: Policy;
  let version: string;
  try {
    ({ policy, version } = await loadPolicyFile(path));
  } catch (error) {
    // Text goes to stderr through the command's error line; JSON readers get the problems on stdout.
    if (!(json && error instanceof PolicyError)) throw error;
    const { problems, total } = error;
    await write(io.stdout, `${JSON.stringify({ ok: false, file: path, total, problems })}\n`);
    return 1;
  }
  const vms = policy.projects.reduce((n, p) => n + p.vms.length, 0);
  const groupWarnings = await unresolvedGroups(io, userGroupsOf(policy));
  const unmet = unmetVerify(io.env, policy);
  const warnings = [
    ...groupWarnings,
    ...(unmet ? [`${fieldOf(unmet.path)}: ${unmetWords(unmet)}`] : []),
    ...unmetTickets(io, policy),
    ...jiraRulesOfAnyProject(policy),
  ];
  const summary = {
    ok: true,
    file: path,
    version,
    projects: policy.projects.map((p) => ({
      name: p.name,
      uuid: p.uuid,
      cluster: p.cluster ?? null,
      channels: p.channels,
      approvers: p.approvers ?? policy.approvers,
      requesters: p.requesters ?? null,
      approval: p.approval,
      verify: verifiedApprovals(policy, p),
      vms: p.vms.length,
      changeTicket: changeTicketOf(policy, p) ?? null,
    })),
    agents: policy.agents.map((a) => ({ name: a.name, verify: a.verify ?? null })),
    currency: policy.currency,
    requestsPerHour: policy.requests_per_hour,
    limits: policy.limits,
    resizeFields: {
      cpuClass: policy.resize_fields.cpu_class?.field ?? null,
      privateNetwork: policy.resize_fields.private_network?.field ?? null,
    },
    warnings,
  };
  if (json) {
    await write(io.stdout, `${JSON.stringify(summary)}\n`);
    return 0;
  }
  const lines = [
    `${path}: OK, version ${version}, ${policy.projects.length} project(s), ${vms} VM fact(s), currency ${policy.currency}.`,
    ...policy.projects.map(
      (p) =>
        `  ${p.name} (${p.uuid})${p.cluster ? ` in ${p.cluster}` : ', no cluster for cost previews'}: channels ${p.channels.join(', ')}; approvers ${(p.approvers ?? policy.approvers).join(', ') || 'none'}; ${requestersLine(p)}${verifiedLine(policy, p)}${ticketLine(policy, p)}`,
    ),
    ...policy.agents
      .filter((a) => a.verify)
      .map(
        (a) => `  agent ${a.name}: every request needs verified approvals (${verifyText(a.verify ?? [])})`,
      ),
  ];
  if (!policy.resize_fields.cpu_class)
    lines.push('  CPU class is not configured (resize_fields.cpu_class): it is never sent.');
  if (!policy.resize_fields.private_network) {
    lines.push('  Private network is not configured (resize_fields.private_network): it is never sent.');
  }
  lines.push(`  Each person may make ${policy.requests_per_hour} requests an hour (requests_per_hour).`);
  lines.push(...warnings.map((w) => `  warning: ${w}`));
  await write(io.stdout, `${lines.join('\n')}\n`);
  return 0;
}

/** Who may ask in a project: its `requesters`, or (unset) anyone in its channels, as the bot has always let them. */
function requestersLine(project: { requesters?: string[] }): string {
  return project.requesters === undefined
    ? "requesters not set: anyone in the project's channels may ask"
    : `requesters ${project.requesters.join(', ') || 'none'}`;
}

/** "; change ticket: Jira, in Approved, for resize_up, restore (projects OPS)", or nothing without one. */
function ticketLine(policy: Policy, project: ProjectPolicy): string {
  const rule = changeTicketOf(policy, project);
  if (!rule) return '';
  const system = rule.system === 'jira' ? 'Jira' : 'ServiceNow';
  const projects = rule.projects ? ` (projects ${rule.projects.join(', ')})` : '';
  return `; change ticket: ${system}${rule.required ? '' : ' (optional)'}, in ${rule.states.join(' or ')}, for ${rule.for.join(', ')}${projects}`;
}

/** A `change_ticket` whose system the environment does not configure: start-up would stop on it. */
function unmetTickets(io: CliIo, policy: Policy): string[] {
  const unmet = unmetTicketSystem(io.env, policy);
  return unmet ? [`${fieldOf(unmet.path)}: ${unmet.words}`] : [];
}

/**
 * A Jira rule without `projects`: a ticket of any project passes, and each project's workflow names its own statuses
 * (in Jira Cloud whoever may create a team-managed project may call one of them Approved), so the rule holds little.
 */
function jiraRulesOfAnyProject(policy: Policy): string[] {
  const rules = [
    { path: 'change_ticket', rule: policy.change_ticket },
    ...policy.projects.map((p, i) => ({ path: `projects[${i}].change_ticket`, rule: p.change_ticket })),
  ];
  return rules.flatMap(({ path, rule }) =>
    rule?.system === 'jira' && rule.projects === undefined
      ? [
          `${path}.projects: not set, so a Jira ticket of any project passes; whoever may create a Jira project may give it a status named like one of states (${rule.states.join(', ')}): name the projects (projects: [OPS])`,
        ]
      : [],
  );
}

/** Which approvals of a project must be verified: by default (the block's `verify`) and per rule. */
function verifiedApprovals(
  policy: Policy,
  project: ProjectPolicy,
): { default: VerifyMethod[] | null; rules: { rule: string; verify: VerifyMethod[] }[] } {
  const approvals = approvalsOf(policy, project);
  return {
    default: approvals.verify ?? null,
    rules: approvals.rules.flatMap((rule, index) => {
      const verify = rule.verify ?? approvals.verify;
      return verify && rule.count > 0 ? [{ rule: describeRule(rule, index, policy.currency), verify }] : [];
    }),
  };
}

/** "; verified approvals: passkey or SSO by default, SSO for rule 2 (…)", or nothing when none are. */
function verifiedLine(policy: Policy, project: ProjectPolicy): string {
  const verified = verifiedApprovals(policy, project);
  const parts = [
    ...(verified.default ? [`${verifyText(verified.default)} by default`] : []),
    ...verified.rules
      .filter((r) => verified.default === null || verifyText(r.verify) !== verifyText(verified.default))
      .map((r) => `${verifyText(r.verify)} for ${r.rule}`),
  ];
  return parts.length > 0 ? `; verified approvals: ${parts.join(', ')}` : '';
}

/**
 * Why each user group of the policy grants nobody (Slack will not resolve it: missing scope, free plan, unknown
 * id), asked of Slack when SLACK_BOT_TOKEN is set; without a token, that they could not be checked.
 */
async function unresolvedGroups(io: CliIo, groups: string[]): Promise<string[]> {
  if (groups.length === 0) return [];
  if (!io.env.SLACK_BOT_TOKEN)
    return [`user groups ${groups.join(', ')} not checked: set SLACK_BOT_TOKEN to ask Slack who is in them`];
  const client = new SlackApi({
    apiUrl: io.env.SLACK_API_URL ?? 'https://slack.com/api/',
    token: io.env.SLACK_BOT_TOKEN,
    proxy: io.env,
  });
  const resolver = createUserGroups(client, {
    logger: createLogger({ level: 'silent', secrets: [io.env.SLACK_BOT_TOKEN] }),
  });
  const problems = await Promise.all(
    groups.map(async (group) => [group, await resolver.problem(group)] as const),
  ).finally(() => client.close());
  return problems
    .filter(([, problem]) => problem !== undefined)
    .map(
      ([group, problem]) => `user group ${group} cannot be resolved by Slack (${problem}): it grants nobody`,
    );
}
