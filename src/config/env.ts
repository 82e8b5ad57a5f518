import { z } from 'zod';
import { sealKeyProblem } from './seal-keys.ts';
import { withSecretFiles } from './secret-files.ts';
import { ticketProblems } from './ticket-variables.ts';
import { TRACING_ENV_SHAPE, TracingConfigError, tracingConfig } from './tracing-env.ts';

/** A whole cloud API call's deadline unless configured (`CLOUD_API_DEADLINE_MS`; docs/operations.md#deadlines). */
export const DEFAULT_CALL_DEADLINE_MS = 45_000;

/** Which parts of the bot a process runs (docs/operations.md#roles). */
export const ROLES = ['all', 'web', 'worker', 'scheduler'] as const;
export type Role = (typeof ROLES)[number];

const url = (what: string) =>
  z.string().refine((v) => /^(https?|rediss?):\/\//.test(v) && URL.canParse(v), {
    message: `expected ${what}`,
  });

const LOOPBACK = /^(localhost|127\.\d+\.\d+\.\d+|\[::1\]|[a-z0-9-]+\.localhost)$/i;

/**
 * A base URL approvers' browsers open: https, or http on this machine for trials (passkeys and secure cookies need
 * a secure context, which browsers grant to localhost alone). No query or fragment; a trailing slash is dropped.
 */
const browserUrl = (what: string) =>
  z
    .string()
    .refine(
      (v) => {
        if (!URL.canParse(v)) return false;
        const u = new URL(v);
        return (
          (u.protocol === 'https:' || (u.protocol === 'http:' && LOOPBACK.test(u.hostname))) &&
          u.search === '' &&
          u.hash === '' &&
          u.username === '' &&
          u.password === ''
        );
      },
      { message: `expected ${what}` },
    )
    .transform((v) => v.replace(/\/+$/, ''));

/** A ticket system's base URL: https (http only on this machine, for trials: its credentials go with every call). */
const ticketUrl = (what: string) =>
  browserUrl(`${what} (https; http only on localhost, since the credentials go with every call)`);

const port = z.coerce
  .number({ message: 'expected a port number' })
  .int({ message: 'expected a whole port number' })
  .min(0, { message: 'expected a port from 0 to 65535' })
  .max(65535, { message: 'expected a port from 0 to 65535' });

const host = z.string().regex(/^(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*)$/, {
  message: 'expected an IP address or host name, such as 0.0.0.0 or 127.0.0.1',
});

const proxyUrl = z.string().refine((v) => /^https?:\/\//.test(v) && URL.canParse(v), {
  message: 'expected the proxy as an http(s) URL, such as http://proxy.example.com:3128',
});

const STARTUP_SECONDS = 'expected whole seconds from 5 to 600, such as 30';

/** A sealing key: at least 32 random bytes as hex or base64 (src/config/seal-keys.ts); the message never shows it. */
const sealKey = z.string().superRefine((value, ctx) => {
  const problem = sealKeyProblem(value);
  if (problem) ctx.addIssue({ code: 'custom', message: problem.message });
});

const envSchema = z.object({
  SLACK_BOT_TOKEN: z
    .string()
    .regex(/^xoxb-/, { message: 'expected a bot token starting with xoxb-' })
    .optional(),
  SLACK_SIGNING_SECRET: z.string().min(1, { message: 'expected a non-empty signing secret' }).optional(),
  SLACK_APP_TOKEN: z
    .string()
    .regex(/^xapp-/, { message: 'expected an app-level token starting with xapp-' })
    .optional(),
  SLACK_API_URL: url('an http(s) URL such as https://slack.com/api/').default('https://slack.com/api/'),
  CLOUD_API_URL: url('the API base URL, e.g. https://api.example.com').optional(),
  CLOUD_API_KEY: z.string().min(1, { message: 'expected a non-empty API key' }).optional(),
  /** The deadline of a whole API call, whatever the peer does byte by byte (docs/operations.md#deadlines). */
  CLOUD_API_DEADLINE_MS: z.coerce
    .number({ message: 'expected milliseconds, such as 45000' })
    .int({ message: 'expected whole milliseconds, such as 45000' })
    .min(100, { message: 'expected from 100 to 600000 milliseconds' })
    .max(600_000, { message: 'expected from 100 to 600000 milliseconds' })
    .default(DEFAULT_CALL_DEADLINE_MS),
  REDIS_URL: url('a redis:// or rediss:// URL').default('redis://127.0.0.1:6379'),
  /** Prefix of every Redis key and queue, so several deployments can share one Redis. */
  REDIS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9:_-]{1,64}$/, { message: 'expected letters, digits, ":", "_" or "-" (at most 64)' })
    .default('cloudops'),
  /** `host:port,host:port` of Redis Sentinels: the master is found through them; REDIS_URL gives password, db, TLS. */
  REDIS_SENTINELS: z
    .string()
    .refine((v) => parseSentinels(v) !== undefined, {
      message: 'expected host:port of each Sentinel, separated by commas, e.g. 10.0.0.1:26379,10.0.0.2:26379',
    })
    .optional(),
  /**
   * `host:port,host:port` of some nodes of a Redis Cluster: the client finds the others; REDIS_URL gives only the
   * user, password and TLS.
   */
  REDIS_CLUSTER_NODES: z
    .string()
    .refine((v) => parseAddresses(v) !== undefined, {
      message: 'expected host:port of cluster nodes, separated by commas, e.g. 10.0.0.1:6379,10.0.0.2:6379',
    })
    .optional(),
  /** A PEM file with the CA certificate(s) that signed Redis' certificate, for rediss:// with a private CA. */
  REDIS_TLS_CA_FILE: z.string().min(1).optional(),
  /**
   * The Sentinels' own password (their `requirepass`), when they ask for one; REDIS_URL's password is the data
   * nodes'. Only with REDIS_SENTINELS.
   */
  REDIS_SENTINEL_PASSWORD: z.string().min(1).optional(),
  /** The master's name at the Sentinels (default `mymaster`, applied where the connection is made). */
  REDIS_SENTINEL_NAME: z
    .string()
    .regex(/^[A-Za-z0-9._-]{1,64}$/, {
      message: 'expected the master name the Sentinels monitor, e.g. mymaster',
    })
    .optional(),
  PORT: port.default(3000),
  /**
   * Address the HTTP receiver binds to (not used in Socket Mode). Default `0.0.0.0`: every IPv4 interface, as a
   * container needs; `127.0.0.1` keeps the bot on loopback behind a local proxy; `::` listens on IPv6 too.
   */
  HOST: host.default('0.0.0.0'),
  /** Where `/metrics` listens: its own port, on loopback unless said otherwise, never the public Slack port. */
  METRICS_PORT: port.default(9464),
  METRICS_HOST: host.default('127.0.0.1'),
  /** Where agents reach the MCP server (web role, `/mcp`); unset: no MCP server (docs/agents.md). */
  MCP_PORT: port.optional(),
  MCP_HOST: host.default('127.0.0.1'),
  /**
   * Browser origins allowed to call `/mcp` (comma-separated): a request with any other `Origin` is refused, and these
   * get CORS answers. Each must be an http(s) origin with a host.
   */
  MCP_ALLOWED_ORIGINS: z
    .string()
    .superRefine((value, ctx) => {
      const bad = value
        .split(',')
        .map((o) => o.trim())
        .find((o) => webOrigin(o) === undefined);
      if (bad !== undefined)
        ctx.addIssue({
          code: 'custom',
          message: `“${bad.slice(0, 100)}” is not a web origin: give each as scheme and host, e.g. https://agents.example.com or http://localhost:3000, separated by commas`,
        });
    })
    .optional(),
  /** Where the audit log is shipped as it is written (docs/operations.md#audit-export); unset: not shipped. */
  AUDIT_WEBHOOK_URL: z
    .string()
    .refine((v) => /^https?:\/\//.test(v) && URL.canParse(v), {
      message: 'expected an http(s) URL such as https://logs.example.com/cloudops-audit',
    })
    .optional(),
  /** Signs each audit batch: `x-cloudops-signature: sha256=<hex HMAC-SHA256 of the body>`. */
  AUDIT_WEBHOOK_SECRET: z
    .string()
    .min(16, { message: 'expected at least 16 characters, e.g. from openssl rand -hex 32' })
    .optional(),
  /** Jira for change tickets (docs/configuration.md#change-tickets): the site, e.g. https://example.atlassian.net. */
  JIRA_URL: ticketUrl('the Jira site, e.g. https://example.atlassian.net').optional(),
  /** Jira Cloud: the account's email and an API token (Basic, REST API v3). */
  JIRA_EMAIL: z.string().min(3).max(320).optional(),
  JIRA_API_TOKEN: z.string().min(1, { message: 'expected a non-empty API token' }).optional(),
  /** Jira Data Center: a personal access token (Bearer, REST API v2). */
  JIRA_TOKEN: z.string().min(1, { message: 'expected a non-empty personal access token' }).optional(),
  /** ServiceNow for change tickets: the instance, e.g. https://example.service-now.com. */
  SERVICENOW_URL: ticketUrl('the instance, e.g. https://example.service-now.com').optional(),
  SERVICENOW_USER: z.string().min(1).max(320).optional(),
  SERVICENOW_PASSWORD: z.string().min(1, { message: 'expected a non-empty password' }).optional(),
  /**
   * Where approvers' browsers reach the web role for verified approvals (docs/policy.md#verified-approvals), without
   * a trailing slash; the SSO redirect URI is `${PUBLIC_URL}/auth/callback`.
   */
  PUBLIC_URL: browserUrl(
    'the https:// URL approvers open, e.g. https://cloudops.example.com (http only on localhost)',
  ).optional(),
  /** The OpenID Provider of the company SSO (its discovery document is at `/.well-known/openid-configuration`). */
  OIDC_ISSUER: browserUrl(
    'the issuer URL of the OpenID Provider, e.g. https://login.example.com/realms/company (http only on localhost)',
  ).optional(),
  OIDC_CLIENT_ID: z.string().min(1).max(512, { message: 'expected at most 512 characters' }).optional(),
  OIDC_CLIENT_SECRET: z.string().min(1).optional(),
  /** Space-separated `acr_values` asked of the provider (e.g. a phishing-resistant MFA class); unset: none asked. */
  OIDC_ACR_VALUES: z
    .string()
    .regex(/^[\x21-\x7e]+( [\x21-\x7e]+)*$/, {
      message: 'expected acr values separated by single spaces, e.g. "phr phrh"',
    })
    .optional(),
  /**
   * Seals every decision that lets a request run, and the keys of the audit chain and the page's sessions are
   * derived from it (docs/configuration.md#seal-key). Required by every role; the bot never makes one up.
   */
  SEAL_KEY: sealKey.optional(),
  /** The key before the current one, during a rotation: accepted for checking seals, never for sealing. */
  SEAL_KEY_PREVIOUS: sealKey.optional(),
  POLICY_FILE: z.string().min(1).default('./policy.yml'),
  /** `1`: read POLICY_FILE again when it changes (its folder is watched: a ConfigMap swaps a symlink). */
  POLICY_WATCH: z.enum(['0', '1'], { message: 'expected 1 (watch the policy file) or 0' }).default('0'),
  ROLE: z.enum(ROLES, { message: `expected one of ${ROLES.join(', ')}` }).default('all'),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
      message: 'expected a pino level: fatal, error, warn, info, debug, trace or silent',
    })
    .default('info'),
  /** The standard OpenTelemetry variables (docs/tracing.md). */
  ...TRACING_ENV_SHAPE,
  /** The start-up's deadline, counted from the process's start (docs/operations.md#start-up). */
  STARTUP_TIMEOUT_SECONDS: z.coerce
    .number({ message: STARTUP_SECONDS })
    .int({ message: STARTUP_SECONDS })
    .min(5, { message: STARTUP_SECONDS })
    .max(600, { message: STARTUP_SECONDS })
    .default(10),
  /** The forward proxy for outbound calls (docs/configuration.md#outbound-proxy); the lower-case names win. */
  HTTPS_PROXY: proxyUrl.optional(),
  HTTP_PROXY: proxyUrl.optional(),
  NO_PROXY: z.string().optional(),
});

/**
 * The origin (`scheme://host[:port]`) of an http or https URL, as a browser sends it in `Origin`; undefined for
 * anything else: no scheme (`localhost:3000` parses as scheme `localhost:`), another scheme, or no host, all of which
 * would parse to the origin `null` that any sandboxed page sends.
 */
export function webOrigin(value: string): string | undefined {
  if (!URL.canParse(value)) return undefined;
  const url = new URL(value);
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') return undefined;
  return url.origin;
}

/** The proxy variables, read in either case as curl and undici do: the lower-case one wins when both are set. */
const EITHER_CASE = new Set(['HTTPS_PROXY', 'HTTP_PROXY', 'NO_PROXY']);

/** A Sentinel's address. */
export interface SentinelAddress {
  host: string;
  port: number;
}

/** `host:port,host:port` of Sentinels (IPv6 hosts in brackets) → addresses; undefined when any part is malformed. */
export function parseSentinels(value: string): SentinelAddress[] | undefined {
  return parseAddresses(value);
}

/** `host:port,host:port` (IPv6 hosts in brackets) → addresses; undefined when any part is malformed. */
export function parseAddresses(value: string): SentinelAddress[] | undefined {
  const parts = value.split(',').map((p) => p.trim());
  const out: SentinelAddress[] = [];
  for (const part of parts) {
    const match = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*):(\d{1,5})$/.exec(part);
    const port = Number(match?.[2]);
    if (!match?.[1] || !Number.isInteger(port) || port < 1 || port > 65535) return undefined;
    out.push({ host: match[1].replace(/^\[|\]$/g, ''), port });
  }
  return out.length > 0 ? out : undefined;
}

/** The process environment, parsed and typed. Secrets stay in here and are never logged. */
export type Env = z.infer<typeof envSchema>;

/** Configuration problems, each phrased as one line for the operator naming its variable. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  /** Every problem found, one line each (`VARIABLE: what is wrong`). */
  readonly problems: string[];

  constructor(problems: string | string[], heading = 'problems in the environment') {
    const list = typeof problems === 'string' ? [problems] : problems;
    super(
      list.length === 1
        ? (list[0] ?? '')
        : [`${list.length} ${heading}:`, ...list.map((p) => `  ${p}`)].join('\n'),
    );
    this.problems = list;
  }
}

/**
 * Parses the environment. Empty strings count as unset, as shells and compose files produce them.
 * Throws {@link ConfigError} naming every bad variable, one line each; no value is ever echoed.
 */
export function loadEnv(given: Record<string, string | undefined>): Env {
  // `NAME_FILE` fills `NAME` first: a secret from a file is checked like one from the environment.
  const { env: raw, problems: fileProblems } = withSecretFiles(given);
  if (fileProblems.length > 0) throw new ConfigError(fileProblems, 'secret variables cannot be read');
  const cleaned: Record<string, string> = {};
  for (const key of Object.keys(envSchema.shape)) {
    const value = EITHER_CASE.has(key) ? (raw[key.toLowerCase()] ?? raw[key]) : raw[key];
    if (value !== undefined && value.trim() !== '') cleaned[key] = value.trim();
  }
  const parsed = envSchema.safeParse(cleaned);
  if (!parsed.success) {
    // Every malformed variable at once (its first issue), so one run of doctor or start-up names them all.
    const byVariable = new Map<string, string>();
    for (const issue of parsed.error.issues) {
      const name = String(issue.path[0]);
      if (!byVariable.has(name)) byVariable.set(name, `${name}: ${issue.message}`);
    }
    throw new ConfigError([...byVariable.values()], 'variables are malformed');
  }
  const data = parsed.data;
  const problems: string[] = [];
  // A name alone would silently connect to REDIS_URL's single Redis, not to the master the operator named.
  if (data.REDIS_SENTINEL_NAME !== undefined && data.REDIS_SENTINELS === undefined)
    problems.push(
      'REDIS_SENTINEL_NAME: set without REDIS_SENTINELS; give the Sentinels as host:port,host:port, or unset both to use REDIS_URL alone',
    );
  if (data.REDIS_SENTINEL_PASSWORD !== undefined && data.REDIS_SENTINELS === undefined)
    problems.push(
      "REDIS_SENTINEL_PASSWORD: set without REDIS_SENTINELS; it is the Sentinels' password (REDIS_URL carries the Redis password)",
    );
  try {
    tracingConfig(data);
  } catch (error) {
    if (error instanceof TracingConfigError) problems.push(error.message);
    else throw error;
  }
  if (data.REDIS_CLUSTER_NODES !== undefined && data.REDIS_SENTINELS !== undefined)
    problems.push(
      'REDIS_CLUSTER_NODES: set together with REDIS_SENTINELS; a Redis Cluster fails over by itself, so give one of them',
    );
  // A cluster has one database: a db in REDIS_URL would be silently ignored by some nodes and refused by others.
  if (data.REDIS_CLUSTER_NODES !== undefined && !['', '/', '/0'].includes(new URL(data.REDIS_URL).pathname))
    problems.push(
      'REDIS_URL: a Redis Cluster has database 0 only; remove the /db part when REDIS_CLUSTER_NODES is set',
    );
  if (data.AUDIT_WEBHOOK_SECRET !== undefined && data.AUDIT_WEBHOOK_URL === undefined)
    problems.push(
      'AUDIT_WEBHOOK_SECRET: set without AUDIT_WEBHOOK_URL; give the receiver the audit is shipped to, or unset both',
    );
  if (data.REDIS_TLS_CA_FILE !== undefined && !data.REDIS_URL.startsWith('rediss:'))
    problems.push(
      'REDIS_TLS_CA_FILE: set, but REDIS_URL does not ask for TLS; use a rediss:// URL (e.g. rediss://:password@host:6380)',
    );
  // Both servers would bind the same port: the second would fail as if another process held it.
  if (data.METRICS_PORT !== 0 && data.METRICS_PORT === data.PORT)
    problems.push(
      `METRICS_PORT: ${data.PORT} is PORT too; /metrics needs a port of its own (default 9464), so set one of them to another port`,
    );
  if (
    data.MCP_PORT !== undefined &&
    data.MCP_PORT !== 0 &&
    [data.PORT, data.METRICS_PORT].includes(data.MCP_PORT)
  )
    problems.push(
      `MCP_PORT: ${data.MCP_PORT} is ${data.MCP_PORT === data.PORT ? 'PORT' : 'METRICS_PORT'} too; the MCP server needs a port of its own`,
    );
  const oidc = (['OIDC_ISSUER', 'OIDC_CLIENT_ID', 'OIDC_CLIENT_SECRET'] as const).filter(
    (name) => data[name] !== undefined,
  );
  if (oidc.length > 0 && oidc.length < 3)
    problems.push(
      `${oidc[0]}: set without ${(['OIDC_ISSUER', 'OIDC_CLIENT_ID', 'OIDC_CLIENT_SECRET'] as const).filter((n) => !oidc.includes(n)).join(' and ')}; the SSO login needs all three (docs/policy.md#verified-approvals)`,
    );
  if (oidc.length === 0 && data.OIDC_ACR_VALUES !== undefined)
    problems.push('OIDC_ACR_VALUES: set without OIDC_ISSUER; it is asked of the SSO provider');
  if (oidc.length === 3 && data.PUBLIC_URL === undefined)
    problems.push(
      'OIDC_ISSUER: set without PUBLIC_URL; the provider sends approvers back to PUBLIC_URL/auth/callback',
    );
  problems.push(...ticketProblems(data));
  if (data.SEAL_KEY_PREVIOUS !== undefined && data.SEAL_KEY === undefined)
    problems.push(
      'SEAL_KEY_PREVIOUS: set without SEAL_KEY; the previous key only checks seals, so give the current one as SEAL_KEY',
    );
  if (problems.length > 0) throw new ConfigError(problems);
  return data;
}

/**
 * The SSO redirect URI registered at the provider: `${PUBLIC_URL}/auth/callback`; undefined without PUBLIC_URL.
 */
export function oidcRedirectUri(env: Pick<Env, 'PUBLIC_URL'>): string | undefined {
  return env.PUBLIC_URL === undefined ? undefined : `${env.PUBLIC_URL}/auth/callback`;
}

/**
 * What a role needs from the environment; returns the names that are missing, empty when all is there. A web role
 * with neither Slack mode chosen is asked for SLACK_APP_TOKEN: manifest.yml sets the app up for Socket Mode.
 */
export function missingForRole(env: Env): string[] {
  const missing: string[] = [];
  const web = env.ROLE === 'all' || env.ROLE === 'web';
  if (!env.SLACK_BOT_TOKEN) missing.push('SLACK_BOT_TOKEN');
  if (web && !env.SLACK_APP_TOKEN && !env.SLACK_SIGNING_SECRET) missing.push('SLACK_APP_TOKEN');
  if (!env.CLOUD_API_URL) missing.push('CLOUD_API_URL');
  if (!env.CLOUD_API_KEY) missing.push('CLOUD_API_KEY');
  // Every role seals or checks decisions: a process without the key could neither approve nor run anything.
  if (!env.SEAL_KEY) missing.push('SEAL_KEY');
  return missing;
}

/**
 * The one line for missing variables: which, what the Slack mode in use needs (docs/configuration.md#slack-modes),
 * and where to set them.
 */
export function missingLine(env: Env, missing: string[]): string {
  const web = env.ROLE === 'all' || env.ROLE === 'web';
  let mode = '';
  if (web && missing.some((name) => name.startsWith('SLACK_'))) {
    if (env.SLACK_APP_TOKEN) mode = ' Socket Mode needs SLACK_BOT_TOKEN and SLACK_APP_TOKEN.';
    else if (env.SLACK_SIGNING_SECRET) mode = ' HTTP mode needs SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET.';
    else if (missing.includes('SLACK_APP_TOKEN'))
      mode =
        ' Socket Mode (as manifest.yml sets the app up) needs SLACK_APP_TOKEN, an app-level token (xapp-…); for HTTP mode set SLACK_SIGNING_SECRET instead.';
  } else if (!web && missing.includes('SLACK_BOT_TOKEN'))
    mode = ` ROLE ${env.ROLE} needs SLACK_BOT_TOKEN to post its replies.`;
  if (missing.includes('SEAL_KEY'))
    mode += ' SEAL_KEY seals every approval: at least 32 random bytes, e.g. from openssl rand -hex 32.';
  return `missing ${missing.join(', ')}.${mode} Set them in .env or the environment (docs/configuration.md), or try everything locally with no account: npm run demo`;
}
