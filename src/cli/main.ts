/**
 * `cloudops`: the operator's command line. Read-only against the API (clusters, cluster, plan), the policy file
 * (policy check) and the audit log (audit). Output on stdout (`--json` for machines); an error is one line on
 * stderr with a non-zero exit: 1 runtime, 2 usage, 3 a plan the rules refuse.
 */
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { CloudApiError } from '../cloud/errors.ts';
import { withDotEnv } from '../config/dotenv.ts';
import { ConfigError, loadEnv } from '../config/env.ts';
import { PolicyError } from '../config/policy.ts';
import { withSecretFiles } from '../config/secret-files.ts';
import { packageVersion } from '../config/version.ts';
import { botVariablesSet } from '../mcp/stdio-client.ts';
import { CliError, type CliIo, UsageError, write } from './io.ts';
import { PLAN_USAGE, REPORT_USAGE } from './usage.ts';

export const USAGE = `Usage: cloudops <command> [options]

Commands:
  clusters [--json]                          active clusters with hourly prices and the reference VM's cost
  cluster <name> [--shape A|B] [--json]      one cluster (Shape A by default, Shape B where A is not found)
  policy check [file] [--json]               validate a policy file (default POLICY_FILE)
  ${PLAN_USAGE.replace('cloudops ', '')}
                                             the rules and cost of a resize; sends nothing
  audit --since <ISO|30m|24h|7d> [--json]    the audit log (JSON lines with --json)
  audit verify [--file F]                    check the audit chain in Redis, or an exported copy (exit 1 if broken)
  ${REPORT_USAGE.replace('cloudops ', '')}
                                             every request of a period, for an auditor (csv, html or json)
  doctor [--json]                            check Node, the policy, Redis, Slack, the cloud API and the clock
  agents token                               a new agent token and the SHA-256 the policy stores
  agents list [--json]                       the policy's agents, and which are disabled
  agents disable|enable <name> [--as NAME]   stop an agent at once, or let it ask again (audited)
  passkeys reset <user> [--as NAME]          remove a Slack user's passkeys (audited)
  mcp                                        the bot's MCP tools over stdio (CLOUDOPS_URL, CLOUDOPS_AGENT_TOKEN)
  help                                       this text
  --version                                  the version of cloudops

Environment (and .env in the working directory): CLOUD_API_URL, CLOUD_API_KEY, POLICY_FILE, REDIS_URL,
REDIS_PREFIX; doctor also the SLACK_* variables; mcp only CLOUDOPS_URL, CLOUDOPS_AGENT_TOKEN and the proxy.
Exit codes: 0 ok, 1 error, 2 usage, 3 plan refused by the rules.
`;

const OPTIONS = {
  json: { type: 'boolean' },
  shape: { type: 'string' },
  since: { type: 'string' },
  stopped: { type: 'boolean' },
  'two-step': { type: 'boolean' },
  at: { type: 'string' },
  as: { type: 'string' },
  file: { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  project: { type: 'string' },
  format: { type: 'string' },
  out: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'v' },
} as const;

/** Where a command's options and its allowed flags are checked, so a flag meant for another command is refused. */
const FLAGS: Record<string, readonly string[]> = {
  clusters: ['json'],
  cluster: ['json', 'shape'],
  policy: ['json'],
  plan: ['json', 'stopped', 'two-step', 'at'],
  audit: ['json', 'since', 'file'],
  report: ['from', 'to', 'project', 'format', 'out'],
  doctor: ['json'],
  agents: ['json', 'as'],
  passkeys: ['json', 'as'],
  mcp: [],
};

/** Runs one command line; resolves with the exit code. Throws only what {@link main} turns into one line. */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError(`${(error as Error).message.split('\n')[0]} (see cloudops help)`);
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.version && command === undefined) {
    await write(io.stdout, `cloudops ${packageVersion()}\n`);
    return 0;
  }
  if (command === undefined || command === 'help' || values.help) {
    await write(io.stdout, USAGE);
    return command === undefined && !values.help ? 2 : 0;
  }
  const allowed = FLAGS[command];
  if (!allowed) throw new UsageError(`unknown command "${command}" (see cloudops help)`);
  for (const [flag, value] of Object.entries(values)) {
    if (value !== undefined && !allowed.includes(flag))
      throw new UsageError(`${command} does not take --${flag}`);
  }
  const json = values.json ?? false;
  switch (command) {
    case 'clusters':
      if (rest.length > 0) throw new UsageError('clusters takes no arguments');
      return (await import('./commands/clusters.ts')).clustersCommand(io, json);
    case 'cluster': {
      const [name, ...extra] = rest;
      if (name === undefined || extra.length > 0)
        throw new UsageError('usage: cloudops cluster <name> [--shape A|B] [--json]');
      const shape = values.shape?.toUpperCase();
      if (shape !== undefined && shape !== 'A' && shape !== 'B') throw new UsageError('--shape is A or B');
      return (await import('./commands/cluster.ts')).clusterCommand(io, name, shape, json);
    }
    case 'policy': {
      const [sub, file, ...extra] = rest;
      if (sub !== 'check' || extra.length > 0)
        throw new UsageError('usage: cloudops policy check [file] [--json]');
      return (await import('./commands/policy.ts')).policyCheckCommand(io, file, json);
    }
    case 'plan': {
      const [sub, ...args] = rest;
      if (sub !== 'resize') throw new UsageError(`usage: ${PLAN_USAGE}`);
      return (await import('./commands/plan.ts')).planResizeCommand(io, args, {
        stopped: values.stopped ?? false,
        twoStep: values['two-step'] ?? false,
        at: values.at,
        json,
      });
    }
    case 'audit':
      if (rest[0] === 'verify') {
        if (rest.length > 1 || values.since !== undefined || json)
          throw new UsageError('usage: cloudops audit verify [--file F]');
        return (await import('./commands/audit-verify.ts')).auditVerifyCommand(io, values.file);
      }
      if (rest.length > 0 || values.file !== undefined)
        throw new UsageError(
          'usage: cloudops audit --since <ISO|24h> [--json] | cloudops audit verify [--file F]',
        );
      return (await import('./commands/audit.ts')).auditCommand(io, values.since, json);
    case 'report':
      if (rest.length > 0) throw new UsageError(`usage: ${REPORT_USAGE}`);
      return (await import('./commands/report.ts')).reportCommand(io, values);
    case 'doctor':
      if (rest.length > 0) throw new UsageError('usage: cloudops doctor [--json]');
      return (await import('./commands/doctor.ts')).doctorCommand(io, json);
    case 'agents':
      return (await import('./commands/agents.ts')).agentsCommand(io, rest, json, values.as);
    case 'passkeys':
      return (await import('./commands/passkeys.ts')).passkeysCommand(io, rest, json, values.as);
    case 'mcp':
      if (rest.length > 0)
        throw new UsageError(
          'mcp takes no arguments (the bot is CLOUDOPS_URL, the token CLOUDOPS_AGENT_TOKEN)',
        );
      return (await import('./commands/mcp.ts')).mcpCommand(io);
    default:
      throw new UsageError(`unknown command "${command}" (see cloudops help)`);
  }
}

/**
 * What stderr shows: our own errors as they are (a policy's problems one line each), anything else by its first
 * line, never a stack.
 */
export function errorLine(error: unknown): { line: string; code: number } {
  if (error instanceof CliError) return { line: error.message, code: error.exitCode };
  if (error instanceof ConfigError || error instanceof PolicyError || error instanceof CloudApiError) {
    return { line: error.message, code: 1 };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { line: message.split('\n')[0] ?? 'unknown error', code: 1 };
}

/** What `cloudops mcp` reads of the environment for its env: the proxy variables (either case) and LOG_LEVEL. */
function clientVariables(raw: Record<string, string | undefined>): Record<string, string | undefined> {
  const names = [
    'HTTPS_PROXY',
    'HTTP_PROXY',
    'NO_PROXY',
    'https_proxy',
    'http_proxy',
    'no_proxy',
    'LOG_LEVEL',
  ];
  return Object.fromEntries(names.map((name) => [name, raw[name]]));
}

/** `cloudops mcp`'s own variables (the token may be CLOUDOPS_AGENT_TOKEN_FILE), and the bot's that are set. */
function mcpClientConfig(raw: Record<string, string | undefined>): NonNullable<CliIo['mcp']> {
  const { env, problems } = withSecretFiles({
    CLOUDOPS_AGENT_TOKEN: raw.CLOUDOPS_AGENT_TOKEN,
    CLOUDOPS_AGENT_TOKEN_FILE: raw.CLOUDOPS_AGENT_TOKEN_FILE,
  });
  if (problems.length > 0) throw new ConfigError(problems);
  return {
    url: raw.CLOUDOPS_URL,
    token: env.CLOUDOPS_AGENT_TOKEN?.trim() || undefined,
    ignored: botVariablesSet(raw),
  };
}

/** The process entry: parses the environment, runs the command, reports one line on failure. */
export async function main(argv = process.argv.slice(2), rawEnv = process.env): Promise<void> {
  let code: number;
  try {
    // `.env` in the working directory, under the environment, as `npm start` reads it.
    const merged = withDotEnv(rawEnv, '.env');
    const mcp = argv[0] === 'mcp';
    // `cloudops mcp` is a client of the bot: it reads the proxy and the log level alone, never the bot's secrets.
    const env = loadEnv(mcp ? clientVariables(merged) : merged);
    code = await runCli(argv, {
      env,
      policyFileSet: (merged.POLICY_FILE ?? '').trim() !== '',
      stdout: process.stdout,
      now: () => new Date(),
      mcp: mcp ? mcpClientConfig(merged) : undefined,
    });
  } catch (error) {
    const { line, code: exit } = errorLine(error);
    process.stderr.write(`cloudops: ${line}\n`);
    code = exit;
  }
  process.exitCode = code;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
