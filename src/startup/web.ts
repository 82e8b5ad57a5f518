/**
 * The web role: the Slack app (signed HTTP with health on PORT, or Socket Mode), its handlers over the lifecycle,
 * and the one-off look at the policy's user groups. Nothing here takes queued work.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { userGroupsOf } from '../config/policy.ts';
import { createHomeOpens } from '../jobs/home.ts';
import { enqueueNotify } from '../jobs/queues.ts';
import { StepTokens } from '../jobs/workflow-steps.ts';
import { healthRoutes } from '../observability/http.ts';
import { createSlackApp, type SlackApp } from '../slack/app.ts';
import { homeRenderer, withPasskeyButton } from '../slack/blocks/home.ts';
import { pricingWords } from '../slack/commands/pricing.ts';
import { DraftStore, draftSealKey } from '../slack/drafts.ts';
import { RedeliveryGuard } from '../slack/redelivery.ts';
import { standingOf } from '../slack-api/users.ts';
import { LinkStore } from '../verify/links.ts';
import { PasskeyStore, relyingParty } from '../verify/passkeys.ts';
import { verifyPage, verifyRoutes } from '../verify/routes.ts';
import { PageSessions } from '../verify/sessions.ts';
import { createSsoFlow } from '../verify/sso.ts';
import { listening } from './checks.ts';
import type { Core } from './core.ts';

/** The Slack app started; `port` is where it listens in HTTP mode (undefined in Socket Mode). */
export interface StartedWeb {
  port: number | undefined;
  app: SlackApp;
  /** Where the MCP server listens (docs/agents.md); undefined when MCP_PORT is unset. */
  mcpPort: number | undefined;
  /** The verification page's routes, for the health server to serve in Socket Mode; undefined without PUBLIC_URL. */
  page: ((req: IncomingMessage, res: ServerResponse) => boolean) | undefined;
}

/** The SSO login of the page where OIDC is configured (closed with the connections). */
function ssoOf(core: Core) {
  const { env } = core;
  if (!env.OIDC_ISSUER || !env.OIDC_CLIENT_ID || !env.OIDC_CLIENT_SECRET || !env.PUBLIC_URL) return undefined;
  const flow = createSsoFlow(env);
  core.stages.connections.push(() => flow.close());
  return { flow, issuerOrigin: new URL(env.OIDC_ISSUER).origin };
}

/** The approvers' links and their page, where PUBLIC_URL says browsers reach this role; none without it. */
function verificationPageOf(core: Core) {
  const { env, fastRedis, prefix } = core;
  // PUBLIC_URL's path prefix ('' for none): what a proxy in front may strip, and what browsers' paths carry.
  const root = env.PUBLIC_URL === undefined ? '' : new URL(env.PUBLIC_URL).pathname.replace(/\/+$/, '');
  const linkStore =
    env.PUBLIC_URL === undefined
      ? undefined
      : new LinkStore(fastRedis, prefix, env.PUBLIC_URL, core.now, core.sealKeys);
  const page =
    linkStore && env.PUBLIC_URL !== undefined
      ? verifyPage({
          links: linkStore,
          sessions: new PageSessions(fastRedis, prefix, core.sealKeys),
          passkeys: new PasskeyStore(fastRedis, prefix, core.now, core.sealKeys),
          requests: core.store,
          approver: core.requests,
          rp: relyingParty(env.PUBLIC_URL),
          secure: env.PUBLIC_URL.startsWith('https:'),
          root,
          // Through the notify queue: a rate limit or an outage delays the DM, never loses it.
          notify: (user, text, id) => enqueueNotify(core.queues, { type: 'dm', user, text, id }),
          logger: core.logger,
          redis: fastRedis,
          prefix,
          sso: ssoOf(core),
          sealKeys: core.sealKeys,
          standing: (user) => standingOf(core.slack, user),
        })
      : undefined;
  return { root, linkStore, page };
}

/** Starts the Slack app over the core; `socketMode` when SLACK_APP_TOKEN is set. */
export async function startWeb(core: Core, socketMode: boolean): Promise<StartedWeb> {
  const { env, policy, fastRedis, prefix, stages, deadline } = core;
  const digestOf = (channel: string) => core.digests.scheduler.get(channel);
  const { root, linkStore, page } = verificationPageOf(core);
  const homes = createHomeOpens({
    redis: fastRedis,
    connection: core.queueRedis,
    prefix,
    store: core.store,
    approvals: core.approvals,
    renderer: page ? withPasskeyButton(homeRenderer) : homeRenderer,
    now: core.now,
    digestOf,
    groupsOf: core.groupsOf,
    slack: core.slack,
    logger: core.logger,
    rate: core.options.homeRate,
    coalesceMs: core.options.homeOpenCoalesceMs,
  });
  stages.connections.push(() => homes.close());
  const app = createSlackApp(
    env,
    {
      policy,
      store: core.store,
      requests: core.requests,
      slack: core.slack,
      approvals: core.approvals,
      homes,
      stepTokens: new StepTokens(fastRedis, prefix),
      vmFacts: core.vmFacts,
      // Sealed with a key from the secret this mode shares with Slack (src/slack/drafts.ts).
      drafts: new DraftStore(
        fastRedis,
        prefix,
        draftSealKey((socketMode ? env.SLACK_APP_TOKEN : env.SLACK_SIGNING_SECRET) ?? ''),
        core.now,
      ),
      prices: core.prices,
      now: core.now,
      logger: core.logger,
      metrics: core.metrics,
      links: core.options.verificationLinks?.(core.requests) ?? linkStore?.approvalLinks(),
      passkeyLinks: linkStore && {
        issue: (teamId: string, user: string) => linkStore.issue({ kind: 'register', teamId, user }),
      },
      words: pricingWords({
        policy,
        cloud: core.cloud,
        prices: core.prices,
        scheduler: core.digests.scheduler,
        charts: core.charts,
        now: core.now,
        logger: core.logger,
      }),
    },
    // In HTTP mode Bolt's server also answers health and the page; in Socket Mode the health server does (src/main.ts).
    socketMode ? [] : [...healthRoutes(core.readiness), ...(page ? verifyRoutes(page, root) : [])],
    { guard: new RedeliveryGuard(fastRedis, prefix), policy: core.options.reconnectPolicy },
  );
  stages.intake.push(() => app.stop());
  const started = await deadline.step(
    socketMode
      ? 'the Socket Mode connection to Slack (apps.connections.open at SLACK_API_URL)'
      : 'the Slack app listening on PORT',
    socketMode
      ? app.start(0, env.HOST)
      : listening('PORT', env.PORT, env.HOST, app.start(env.PORT, env.HOST)),
  );
  const groups = userGroupsOf(policy);
  if (groups.length > 0 && env.SLACK_BOT_TOKEN) {
    // Not awaited: a slow Slack must not hold the start-up; each group Slack will not resolve is warned about.
    void Promise.all(groups.map((group) => core.userGroups.problem(group))).catch(() => undefined);
  }
  // The agents' surface, beside Slack's, over the same lifecycle. Loaded only when MCP_PORT asks for it: the MCP
  // SDK and what it brings (its schemas, a JSON Schema validator, an HTTP framework) hold about 5 MB in a process.
  const mcpPort = env.MCP_PORT === undefined ? undefined : await (await import('./mcp.ts')).startMcp(core);
  return { port: started.port, app, mcpPort, page };
}
