import { findAgent, newAgentToken, tokenHash } from '../../config/agents.ts';
import { redisKeyPrefix } from '../../config/redis-connection.ts';
import { createOutbox } from '../../jobs/outbox.ts';
import { createQueues } from '../../jobs/queues.ts';
import { AgentControls } from '../../mcp/agent-state.ts';
import { markAgentRequests } from '../../requests/approval/agent-marks.ts';
import { RequestStore } from '../../requests/store/store.ts';
import { cliAuditContext, cliOperator } from '../audit-context.ts';
import { policyOf } from '../cloud.ts';
import { CliError, type CliIo, table, UsageError, write } from '../io.ts';
import { withCliRedis } from '../redis.ts';

export const AGENTS_USAGE =
  'cloudops agents token | agents list [--json] | agents disable <name> | agents enable <name>';

/** The agents' controls on a short-lived Redis connection for one command. */
function withRedis<T>(io: CliIo, use: (controls: AgentControls) => Promise<T>): Promise<T> {
  return withCliRedis(io.env, (redis) => use(new AgentControls(redis, redisKeyPrefix(io.env), io.now)));
}

/**
 * `cloudops agents …`: `token` prints a new agent token and the SHA-256 the policy stores; `disable` stops an agent
 * at once (every tool answers that it is disabled) and `enable` undoes it, both audited; `list` shows the agents of
 * the policy and which are disabled.
 */
export async function agentsCommand(io: CliIo, args: string[], json: boolean, as?: string): Promise<number> {
  const [sub, name, ...extra] = args;
  if (extra.length > 0) throw new UsageError(`usage: ${AGENTS_USAGE}`);
  switch (sub) {
    case 'token': {
      if (name !== undefined) throw new UsageError('agents token takes no arguments');
      const token = newAgentToken();
      const hash = tokenHash(token);
      if (json) await write(io.stdout, `${JSON.stringify({ token, token_sha256: hash })}\n`);
      else
        await write(
          io.stdout,
          `token:        ${token}\ntoken_sha256: ${hash}\n\nGive the token to the agent (its MCP client's Authorization: Bearer header, or CLOUDOPS_AGENT_TOKEN for cloudops mcp); put only token_sha256 in the policy's agents: entry. The token is not shown again.\n`,
        );
      return 0;
    }
    case 'list': {
      if (name !== undefined) throw new UsageError('agents list takes no arguments');
      const policy = await policyOf(io);
      const disabled = new Set(await withRedis(io, (controls) => controls.disabled()));
      const rows = policy.agents.map((a) => ({
        name: a.name,
        on_behalf_of: a.on_behalf_of,
        projects: a.projects,
        may: a.may,
        requests_per_hour: a.requests_per_hour,
        unattended: a.unattended,
        disabled: disabled.has(a.name.toLowerCase()),
      }));
      if (json) await write(io.stdout, `${JSON.stringify(rows)}\n`);
      else if (rows.length === 0) await write(io.stdout, 'No agents in the policy.\n');
      else
        await write(
          io.stdout,
          `${table([
            ['NAME', 'FOR', 'PROJECTS', 'MAY', 'PER HOUR', 'STATE'],
            ...rows.map((r) => [
              r.name,
              r.on_behalf_of,
              r.projects.join(',') || '-',
              r.may.join(','),
              String(r.requests_per_hour),
              r.disabled ? 'disabled' : 'enabled',
            ]),
          ])}\n`,
        );
      return 0;
    }
    case 'disable':
    case 'enable': {
      if (name === undefined) throw new UsageError(`usage: cloudops agents ${sub} <name>`);
      const policy = await policyOf(io);
      const agent = findAgent(policy.agents, name);
      if (!agent) {
        const names = policy.agents.map((a) => a.name).join(', ') || 'none';
        throw new CliError(`no agent "${name.slice(0, 64)}" in ${io.env.POLICY_FILE} (agents: ${names})`);
      }
      const disable = sub === 'disable';
      const prefix = redisKeyPrefix(io.env);
      const { changed, marked } = await withCliRedis(io.env, async (redis) => {
        const audit = cliAuditContext(io);
        const operator = cliOperator(as);
        const changed = await new AgentControls(redis, prefix, io.now, audit).setDisabled(
          agent.name,
          disable,
          operator.actor,
          operator.requester,
        );
        // Its open requests say so in Slack (the bot's workers update the messages), changed or not: a mark lost
        // to a failure before is set now.
        const queues = createQueues(redis, prefix);
        try {
          const store = new RequestStore(redis, { prefix, now: io.now, audit });
          const outbox = createOutbox(queues, io.now);
          const marked = await markAgentRequests({ store, outbox }, agent.name, agent.on_behalf_of, disable);
          return { changed, marked };
        } finally {
          await queues.close();
        }
      });
      const requests =
        marked > 0
          ? ` ${marked} open request${marked === 1 ? '' : 's'} of it ${disable ? 'marked in Slack: they cannot be approved until it is enabled again' : 'approvable again'}.`
          : '';
      await write(
        io.stdout,
        changed
          ? `Agent ${agent.name} is ${disable ? 'disabled: every tool call now answers that it is disabled' : 'enabled again'} (audited).${requests}\n`
          : `Agent ${agent.name} was already ${disable ? 'disabled' : 'enabled'}; nothing changed.${requests}\n`,
      );
      return 0;
    }
    default:
      throw new UsageError(`usage: ${AGENTS_USAGE}`);
  }
}
