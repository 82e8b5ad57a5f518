/**
 * `cloudops doctor`: every dependency the bot needs, checked as the bot would use it, one result per check
 * (docs/troubleshooting.md#cloudops-doctor). Nothing is written anywhere; secrets never appear in a result.
 */
import { type CloudProbe, probeCloudApi } from '../cloud/probe.ts';
import { type Env, missingForRole, missingLine } from '../config/env.ts';
import { proxyConfigured, proxyFor, proxyRefusalAdvice } from '../config/outbound.ts';
import { loadPolicy, type Policy, PolicyError, userGroupsOf } from '../config/policy.ts';
import { redisTarget } from '../config/redis-connection.ts';
import { SlackApi } from '../slack-api/client.ts';
import { REQUIRED_NODE_MAJOR } from '../startup/node-guard.ts';
import { checkOidcClient } from './oidc-client.ts';
import { checkRedis, REDIS_CHECK_MS } from './redis.ts';
import { type CheckResult, fail, ok, warn } from './report.ts';
import { checkPreviousKeyWork } from './seals.ts';
import { checkAppToken, checkBotToken, checkChannels, checkUserGroups, SLACK_CHECK_MS } from './slack.ts';
import { checkTickets } from './tickets.ts';
import {
  checkApproverEmail,
  checkOidcDiscovery,
  checkPublicUrl,
  checkVerifyEnvironment,
  ssoInUse,
  verifyInUse,
} from './verify.ts';

export { REQUIRED_NODE_MAJOR };
/** A clock off by more than this is worth a warning: schedules, the 24-hour rule and expiries lean on it. */
export const CLOCK_WARN_MS = 30_000;
/** Past this Slack refuses the signatures of HTTP mode (5-minute window), and rule timing is visibly off. */
export const CLOCK_FAIL_MS = 5 * 60_000;

/** A peer's clock as its `Date` header gave it. */
interface PeerDate {
  at: Date;
  receivedAt: number;
  roundTripMs: number;
}

/** Runs every check; the order is the order of the lines. */
export async function runDoctor(env: Env, nodeVersion = process.versions.node): Promise<CheckResult[]> {
  const results: CheckResult[] = [checkNode(nodeVersion), ...checkEnvironment(env)];
  let policy: Policy | undefined;
  try {
    policy = await loadPolicy(env.POLICY_FILE);
    const channels = new Set(policy.projects.flatMap((p) => p.channels));
    results.push(
      ok(
        'policy',
        `policy ${env.POLICY_FILE}: ${policy.projects.length} project(s), ${channels.size} channel(s)`,
      ),
    );
  } catch (error) {
    if (!(error instanceof PolicyError)) throw error;
    results.push(
      fail(
        'policy',
        `policy: ${error.summary}`,
        `fix the file (cloudops policy check shows every error), or set POLICY_FILE`,
      ),
    );
  }

  const [redis, slack, cloud, verify, tickets, seals] = await Promise.all([
    checkRedis(redisTarget(env)),
    checkSlack(env, policy),
    checkCloud(env),
    checkVerify(env, policy),
    checkTickets(env, policy),
    checkPreviousKeyWork(env, REDIS_CHECK_MS),
  ]);
  results.push(
    ...redis,
    ...(seals ? [seals] : []),
    ...slack.results.map(through(env, env.SLACK_API_URL)),
    ...cloud.results.map(through(env, env.CLOUD_API_URL)),
    ...verify,
    ...tickets.map(({ check, url }) => through(env, url)(check)),
  );
  results.push(
    checkClock([
      ['Slack', slack.date],
      ['the cloud API', cloud.date],
    ]),
  );
  return results;
}

/** Marks a check with the way its calls to `url` went, when a proxy is configured at all. */
function through(env: Env, url: string | undefined): (check: CheckResult) => CheckResult {
  if (!url || !proxyConfigured(env)) return (check) => check;
  const proxy = proxyFor(url, env);
  const via = proxy ? `proxy ${proxy}` : 'direct (NO_PROXY)';
  return (check) => ({ ...check, via });
}

/** The Node.js running this: the guard at every entry point stops older ones, so this is mostly a record. */
export function checkNode(version: string): CheckResult {
  const major = Number(version.split('.')[0]);
  if (major >= REQUIRED_NODE_MAJOR) return ok('node', `Node.js ${version}`);
  return fail(
    'node',
    `Node.js ${version}: cloudops needs Node.js ${REQUIRED_NODE_MAJOR} or later`,
    `install Node.js ${REQUIRED_NODE_MAJOR} (nodejs.org, or nvm install ${REQUIRED_NODE_MAJOR})`,
  );
}

/** The variables this ROLE and Slack mode need. */
function checkEnvironment(env: Env): CheckResult[] {
  const missing = missingForRole(env);
  const mode = env.SLACK_APP_TOKEN ? 'Socket Mode' : 'HTTP mode';
  if (missing.length === 0) return [ok('environment', `environment: ROLE ${env.ROLE}, ${mode}`)];
  const line = missingLine(env, missing);
  const [what, ...rest] = line.split('. ');
  return [fail('environment', `environment (ROLE ${env.ROLE}): ${what}`, rest.join('. '))];
}

async function checkSlack(
  env: Env,
  policy: Policy | undefined,
): Promise<{ results: CheckResult[]; date?: PeerDate }> {
  if (!env.SLACK_BOT_TOKEN) return { results: [] };
  const token = await checkBotToken(env.SLACK_API_URL, env.SLACK_BOT_TOKEN, SLACK_CHECK_MS, env);
  const results = [...token.results];
  if (env.SLACK_APP_TOKEN)
    results.push(await checkAppToken(env.SLACK_API_URL, env.SLACK_APP_TOKEN, SLACK_CHECK_MS, env));
  if (token.granted && policy) {
    const slack = new SlackApi({
      apiUrl: env.SLACK_API_URL,
      token: env.SLACK_BOT_TOKEN,
      timeoutMs: SLACK_CHECK_MS,
      proxy: env,
    });
    try {
      results.push(...(await checkUserGroups(slack, userGroupsOf(policy))));
      results.push(...(await checkChannels(slack, policy, token.granted)));
      if (ssoInUse(env, policy)) results.push(await checkApproverEmail(slack, token.granted, policy));
    } finally {
      await slack.close();
    }
  }
  return { results, date: token.date };
}

/** Verified approvals, where they are in use: the environment, PUBLIC_URL and the SSO provider. */
async function checkVerify(env: Env, policy: Policy | undefined): Promise<CheckResult[]> {
  if (!verifyInUse(env, policy)) return [];
  const [publicUrl, oidc, client] = await Promise.all([
    env.PUBLIC_URL === undefined
      ? undefined
      : checkPublicUrl(env.PUBLIC_URL, env).then(through(env, env.PUBLIC_URL)),
    env.OIDC_ISSUER === undefined
      ? undefined
      : checkOidcDiscovery(env.OIDC_ISSUER, env, undefined, env.OIDC_ACR_VALUES).then(
          through(env, env.OIDC_ISSUER),
        ),
    checkOidcClient(env).then((result) => result && through(env, env.OIDC_ISSUER ?? '')(result)),
  ]);
  return [checkVerifyEnvironment(env, policy), publicUrl, oidc, client].filter(
    (result): result is CheckResult => result !== undefined,
  );
}

async function checkCloud(env: Env): Promise<{ results: CheckResult[]; date?: PeerDate }> {
  if (!env.CLOUD_API_URL) return { results: [] };
  const probe = await probeCloudApi(env.CLOUD_API_URL, env.CLOUD_API_KEY, undefined, env);
  return {
    results: cloudResults(probe, env.CLOUD_API_URL),
    date:
      probe.reachable && probe.date
        ? { at: probe.date, receivedAt: Date.now(), roundTripMs: probe.roundTripMs }
        : undefined,
  };
}

/** The probe as two checks: the API answers, the key is accepted. */
export function cloudResults(probe: CloudProbe, url: string): CheckResult[] {
  if (!probe.reachable)
    return [
      fail(
        'cloud.reachable',
        `cloud API: ${probe.why}`,
        probe.proxyStatus !== undefined
          ? proxyRefusalAdvice(probe.proxyStatus)
          : `check CLOUD_API_URL (the service's base URL, without /cloud/…) and the network to it`,
      ),
    ];
  const reachable = ok(
    'cloud.reachable',
    `cloud API answers at ${new URL(url).origin}: ${probe.clusters} cluster(s) listed`,
  );
  if (probe.keyAccepted === undefined)
    return [
      reachable,
      fail(
        'cloud.api-key',
        'cloud API key: CLOUD_API_KEY is not set',
        'create a key in the portal (Settings → API Keys) and set CLOUD_API_KEY',
      ),
    ];
  if (probe.keyAccepted) return [reachable, ok('cloud.api-key', 'cloud API accepts CLOUD_API_KEY')];
  return [
    reachable,
    fail(
      'cloud.api-key',
      `cloud API key: ${probe.why}`,
      'create a key in the portal (Settings → API Keys) and set CLOUD_API_KEY to it',
    ),
  ];
}

/** This machine's clock against each peer's `Date` header (whole seconds, so ±1 s plus half the round trip). */
export function checkClock(peers: [string, PeerDate | undefined][]): CheckResult {
  const known = peers.filter((peer): peer is [string, PeerDate] => peer[1] !== undefined);
  if (known.length === 0) return warn('clock', 'clock not checked: no peer answered with a Date header');
  const offsets = known.map(([name, peer]) => {
    // The header is truncated to the second: its middle is half a second later.
    const theirs = peer.at.getTime() + 500;
    const ours = peer.receivedAt - peer.roundTripMs / 2;
    return { name, ms: ours - theirs, slack: 500 + peer.roundTripMs / 2 };
  });
  const worst = offsets.reduce((a, b) => (Math.abs(b.ms) - b.slack > Math.abs(a.ms) - a.slack ? b : a));
  const off = Math.max(0, Math.abs(worst.ms) - worst.slack);
  const words = (o: (typeof offsets)[number]) =>
    `${Math.round(Math.abs(o.ms) / 1000)} s ${o.ms > 0 ? 'ahead of' : 'behind'} ${o.name}`;
  const fix = "sync this machine's clock (NTP: timedatectl set-ntp true, or chrony)";
  if (off > CLOCK_FAIL_MS)
    return fail(
      'clock',
      `clock: this machine is ${words(worst)}: Slack refuses signed requests past 5 minutes, and rule times are off`,
      fix,
    );
  if (off > CLOCK_WARN_MS) return warn('clock', `clock: this machine is ${words(worst)}`, fix);
  return ok(
    'clock',
    `clock within ${Math.max(1, Math.round(Math.max(...offsets.map((o) => Math.abs(o.ms) + o.slack)) / 1000))} s of ${known.map(([name]) => name).join(' and ')}`,
  );
}
