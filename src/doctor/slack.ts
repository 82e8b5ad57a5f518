import { request } from 'undici';
import { parseDate, unreachedBecause } from '../cloud/probe.ts';
import { outboundDispatcher, type ProxyEnv, proxyRefusal, proxyRefusalAdvice } from '../config/outbound.ts';
import type { Policy } from '../config/policy.ts';
import { redactUrl } from '../config/redis-connection.ts';
import { createLogger } from '../observability/logger.ts';
import { createUserGroups } from '../slack/user-groups.ts';
import type { SlackApi } from '../slack-api/client.ts';
import { SlackPlatformError, TOKEN_REFUSED } from '../slack-api/errors.ts';
import { type CheckResult, fail, ok, warn } from './report.ts';
import { BOT_SCOPES, CHANNEL_READ_SCOPES, OPTIONAL_SCOPES } from './scopes.ts';

/** Each Slack call's limit. */
export const SLACK_CHECK_MS = 5_000;

/** What one raw Web API call answered: the parsed body and the headers doctor reads (scopes, Date). */
interface RawAnswer {
  status: number;
  body: { ok?: boolean; error?: string; [field: string]: unknown };
  scopes?: string[];
  date?: Date;
  roundTripMs: number;
}

/** A Web API call with `token`, keeping the headers; rejects only when Slack could not be reached. */
async function rawCall(
  apiUrl: string,
  method: string,
  token: string,
  timeoutMs: number,
  proxy: ProxyEnv,
): Promise<RawAnswer> {
  const base = apiUrl.endsWith('/') ? apiUrl : `${apiUrl}/`;
  const dispatcher = outboundDispatcher(proxy, { connect: { timeout: timeoutMs } });
  try {
    const sentAt = performance.now();
    const response = await request(`${base}${method}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: '',
      dispatcher,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const roundTripMs = performance.now() - sentAt;
    const text = await response.body.text();
    let body: RawAnswer['body'] = {};
    try {
      body = JSON.parse(text) as RawAnswer['body'];
    } catch {
      body = { ok: false, error: `HTTP ${response.statusCode}, not JSON` };
    }
    const header = response.headers['x-oauth-scopes'];
    const scopes = (Array.isArray(header) ? header.join(',') : header)
      ?.split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    return { status: response.statusCode, body, scopes, date: parseDate(response.headers.date), roundTripMs };
  } finally {
    await dispatcher.close().catch(() => undefined);
  }
}

/** The proxy's advice when a proxy refused the call, else `otherwise`. */
function unreachedAdvice(error: unknown, otherwise: string): string {
  const refused = proxyRefusal(error);
  return refused === undefined ? otherwise : proxyRefusalAdvice(refused);
}

/** What the bot token check learned, for the checks that follow it. */
export interface BotTokenFindings {
  results: CheckResult[];
  /** Undefined when the token did not work (later Slack checks are skipped). */
  granted?: Set<string>;
  /** Slack's clock (its `Date` header), with the call's round trip. */
  date?: { at: Date; receivedAt: number; roundTripMs: number };
}

/** The bot token (auth.test) and the scopes Slack granted it (its `x-oauth-scopes` header) against manifest.yml's. */
export async function checkBotToken(
  apiUrl: string,
  token: string,
  timeoutMs = SLACK_CHECK_MS,
  proxy: ProxyEnv = {},
): Promise<BotTokenFindings> {
  let answer: RawAnswer;
  try {
    answer = await rawCall(apiUrl, 'auth.test', token, timeoutMs, proxy);
  } catch (error) {
    return {
      results: [
        fail(
          'slack.bot-token',
          `Slack could not be reached at ${redactUrl(apiUrl)}${unreachedBecause(error)}`,
          unreachedAdvice(error, 'check the network to Slack, and SLACK_API_URL if you set it'),
        ),
      ],
    };
  }
  const date = answer.date && { at: answer.date, receivedAt: Date.now(), roundTripMs: answer.roundTripMs };
  if (answer.body.ok !== true) {
    const error = answer.body.error ?? `HTTP ${answer.status}`;
    const refused = TOKEN_REFUSED.has(error);
    return {
      date,
      results: [
        fail(
          'slack.bot-token',
          `Slack ${refused ? 'refused' : 'did not accept'} SLACK_BOT_TOKEN (auth.test: ${error})`,
          refused
            ? "copy the Bot User OAuth Token (xoxb-…) from the app's OAuth & Permissions page into SLACK_BOT_TOKEN"
            : 'try again; if it persists, check status.slack.com',
        ),
      ],
    };
  }
  const { user, team } = answer.body as { user?: string; team?: string };
  const results = [ok('slack.bot-token', `SLACK_BOT_TOKEN works: bot @${user ?? '?'} in ${team ?? '?'}`)];
  if (answer.scopes === undefined) {
    results.push(
      warn(
        'slack.scopes',
        'Slack did not say which scopes the token has (no x-oauth-scopes header)',
        `make sure the app has ${Object.keys(BOT_SCOPES).join(', ')}`,
      ),
    );
    return { results, date };
  }
  const granted = new Set(answer.scopes);
  const missing = Object.keys(BOT_SCOPES).filter((scope) => !granted.has(scope));
  const named = missing.map((scope) => `${scope}, for ${BOT_SCOPES[scope]}`).join('; ');
  const fix =
    "add them under the app's OAuth & Permissions → Bot Token Scopes (or update the app from manifest.yml), then reinstall it to the workspace";
  if (missing.length === 0)
    results.push(
      ok('slack.scopes', `bot scopes: all ${Object.keys(BOT_SCOPES).length} that manifest.yml asks`),
    );
  // Only optional scopes missing: the bot works, without what they give.
  else if (missing.every((scope) => OPTIONAL_SCOPES.has(scope)))
    results.push(warn('slack.scopes', `bot scopes missing: ${named}`, fix));
  else results.push(fail('slack.scopes', `bot scopes missing: ${named}`, fix));
  return { results, granted, date };
}

/** The app-level token opens a Socket Mode connection (apps.connections.open; the URL it gives is not used). */
export async function checkAppToken(
  apiUrl: string,
  token: string,
  timeoutMs = SLACK_CHECK_MS,
  proxy: ProxyEnv = {},
): Promise<CheckResult> {
  const id = 'slack.app-token';
  let answer: RawAnswer;
  try {
    answer = await rawCall(apiUrl, 'apps.connections.open', token, timeoutMs, proxy);
  } catch (error) {
    return fail(
      id,
      `Slack could not be reached at ${redactUrl(apiUrl)}${unreachedBecause(error)}`,
      unreachedAdvice(error, 'check the network to Slack'),
    );
  }
  if (answer.body.ok === true) return ok(id, 'SLACK_APP_TOKEN opens a Socket Mode connection');
  const error = answer.body.error ?? `HTTP ${answer.status}`;
  return fail(
    id,
    `Slack refused SLACK_APP_TOKEN for Socket Mode (apps.connections.open: ${error})`,
    error === 'not_allowed_token_type'
      ? 'SLACK_APP_TOKEN must be the app-level token (xapp-…), not the bot token'
      : "make an app-level token with the connections:write scope under the app's Basic Information → App-Level Tokens, and turn Socket Mode on",
  );
}

/** Each user group the policy names resolves to members (usergroups.users.list), as approvals will ask. */
export async function checkUserGroups(slack: SlackApi, groups: string[]): Promise<CheckResult[]> {
  if (groups.length === 0) return [];
  const resolver = createUserGroups(slack, { logger: createLogger({ level: 'silent' }) });
  const problems = await Promise.all(
    groups.map(async (group) => [group, await resolver.problem(group)] as const),
  );
  const bad = problems.filter(([, problem]) => problem !== undefined);
  if (bad.length === 0) return [ok('slack.user-groups', `user groups resolve: ${groups.join(', ')}`)];
  return bad.map(([group, problem]) =>
    fail(
      'slack.user-groups',
      `user group ${group} does not resolve (${problem}): it grants nobody an approval`,
      problem === 'missing_scope'
        ? 'add the usergroups:read scope and reinstall the app'
        : problem === 'plan_upgrade_required'
          ? 'user groups need a paid Slack plan: name the approvers by user id (U…) instead'
          : 'check the id in the policy (the group\'s page in Slack, "Copy group ID")',
    ),
  );
}

/**
 * The bot is a member of each channel the policy names (conversations.info), where its scopes allow a look;
 * otherwise one warning naming the scope that would.
 */
export async function checkChannels(
  slack: SlackApi,
  policy: Policy,
  granted: Set<string>,
): Promise<CheckResult[]> {
  const id = 'slack.channels';
  const channels = [...new Set(policy.projects.flatMap((p) => p.channels))];
  if (channels.length === 0) return [];
  const canPublic = granted.has(CHANNEL_READ_SCOPES.public);
  const canPrivate = granted.has(CHANNEL_READ_SCOPES.private);
  if (!canPublic && !canPrivate)
    return [
      warn(
        id,
        `the bot's membership of ${channels.join(', ')} was not checked: that needs the ${CHANNEL_READ_SCOPES.public} scope (${CHANNEL_READ_SCOPES.private} for private channels)`,
        'add the scope to have it checked, or make sure @cloudops is invited to each (/invite @cloudops)',
      ),
    ];
  const results: CheckResult[] = [];
  const members: string[] = [];
  for (const channel of channels) {
    try {
      const answer = await slack.call<{ ok: true; channel?: { is_member?: boolean; name?: string } }>(
        'conversations.info',
        { channel },
      );
      const name = answer.channel?.name ? `#${answer.channel.name} (${channel})` : channel;
      if (answer.channel?.is_member === false)
        results.push(
          fail(
            id,
            `the bot is not in ${name}: its request messages there fail`,
            `invite it: /invite @cloudops in ${name}`,
          ),
        );
      else members.push(channel);
    } catch (error) {
      const code = error instanceof SlackPlatformError ? error.error : (error as Error).message;
      if (code === 'channel_not_found' && !canPrivate)
        results.push(
          warn(
            id,
            `channel ${channel} not found: a private channel can only be seen with the ${CHANNEL_READ_SCOPES.private} scope`,
            'add groups:read to have it checked, or make sure @cloudops is invited to it',
          ),
        );
      else if (code === 'missing_scope')
        results.push(
          warn(
            id,
            `channel ${channel} not checked: Slack wants another scope (${CHANNEL_READ_SCOPES.public} or ${CHANNEL_READ_SCOPES.private})`,
            'make sure @cloudops is invited to it',
          ),
        );
      else
        results.push(
          fail(
            id,
            `channel ${channel}: ${code}`,
            'check the channel id in the policy (channel details, at the bottom)',
          ),
        );
    }
  }
  if (members.length > 0) results.unshift(ok(id, `the bot is in ${members.join(', ')}`));
  return results;
}
