import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Job } from 'bullmq';
import { Redis } from 'ioredis';
import { type CloudSim, type SimSeed, startCloudSim } from '../../sim/cloud/server.ts';
import { type SlackStandIn, type SlackView, startSlackStandIn } from '../../sim/slack/server.ts';
import { loadEnv, type Role } from '../../src/config/env.ts';
import { type Policy, parsePolicy } from '../../src/config/policy.ts';
import { FilePolicySource } from '../../src/config/policy-source.ts';
import {
  createRedis,
  type RedisClient,
  type RedisTarget,
  redisKeyPrefix,
} from '../../src/config/redis-connection.ts';
import { createQueues, type Queues } from '../../src/jobs/queues.ts';
import { type Running, type StartOptions, startCloudops } from '../../src/main.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { exportAudit } from '../../src/requests/audit/audit.ts';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { RequestStore } from '../../src/requests/store/store.ts';
import { CHANNELS, defaultPolicyYaml, TEAM, USERS } from './policies.ts';
import { deleteKeys, testRedisUrl, uniquePrefix } from './redis.ts';
import { TEST_SEAL_KEY } from './seal.ts';
import {
  blockActionsPayload,
  type InputValue,
  interactionBody,
  postSigned,
  type SignOptions,
  type SlackHttpResponse,
  type SlackOrigin,
  slashCommandBody,
  viewState,
  viewSubmissionPayload,
} from './slack-request.ts';
import { WAIT_MS } from './startup.ts';

/** The App Home publish budget of the test bot: one window of a minute, Slack's Tier 4 floor. */
const TEST_HOME_RATE = { max: 100, duration: 60_000 };

// The policy fixtures live in policies.ts; the driver hands them on, so a test imports what it drives with from here.
export {
  CHANNELS,
  defaultPolicyYaml,
  POLICY_HEAD,
  PROD_UUID,
  PROD_VMS,
  STAGING_UUID,
  TEAM,
  USERS,
} from './policies.ts';

export interface HarnessOptions {
  /** The bot's log level (its lines land in `logs`); default warn. */
  logLevel?: 'debug' | 'info' | 'warn';
  /** Policy YAML, or a function of the clock's start; default {@link defaultPolicyYaml}. */
  policyYaml?: string | ((start: Date) => string);
  /** Where the injected clock starts (default: the wall time). The bot and the cloud sim share this clock. */
  now?: Date;
  /** The bot reads its policy from a file (POLICY_FILE's source), so that `reloadPolicy` can change it. */
  policyFile?: boolean;
  /** Which parts the bot runs (default `web`: no worker races the test; `all` runs the whole flow). */
  role?: Role;
  /** Extra start options for the bot (e.g. a fast stranded-request sweep). */
  startOptions?: Pick<
    StartOptions,
    | 'sweepPolicy'
    | 'retentionPolicy'
    | 'vmLock'
    | 'reconnectPolicy'
    | 'duePolicy'
    | 'userGroupCache'
    | 'homeRate'
    | 'homeOpenCoalesceMs'
    | 'verificationLinks'
    | 'ticketRetryMs'
  >;
  /** Slack user groups the stand-in knows before the bot starts: members, or the error Slack answers. */
  userGroups?: Record<string, string[] | { error: string }>;
  /** The cloud sim's world (default its DEFAULT_SEED). */
  simSeed?: SimSeed;
  /** Where the harness's own client reads and cleans up (default the test Redis), e.g. the master of Sentinels. */
  redisTarget?: RedisTarget;
  /**
   * Environment variables over the harness's own, given the cloud sim (e.g. `CLOUD_API_URL` of a proxy in front
   * of it, `REDIS_URL` of a slow proxy); the harness's own Redis client keeps the real Redis.
   */
  env?: (sim: CloudSim) => Record<string, string> | Promise<Record<string, string>>;
  /**
   * How Slack reaches the bot: signed HTTP, or envelopes over the Socket Mode stand-in. Default: `socket` when the
   * environment says CLOUDOPS_TEST_SLACK_MODE=socket (the e2e-socket project), else `http`.
   */
  mode?: SlackMode;
}

export type SlackMode = 'http' | 'socket';

/** The mode the environment asks the e2e flows to run in. */
export function testSlackMode(): SlackMode {
  return process.env.CLOUDOPS_TEST_SLACK_MODE === 'socket' ? 'socket' : 'http';
}

/** Fast reconnects for tests: the production policy's shape, in tens of milliseconds. */
export const TEST_RECONNECT_POLICY = { firstMs: 50, maxMs: 500, helloTimeoutMs: 2000, openTimeoutMs: 2000 };

/** The action ids of a message's buttons, in order. */
export function buttonsOf(blocks: unknown[] | undefined): (string | undefined)[] {
  type Block = { type: string; elements?: { action_id?: string }[] };
  return ((blocks ?? []) as Block[])
    .filter((b) => b.type === 'actions')
    .flatMap((b) => (b.elements ?? []).map((e) => e.action_id));
}

/** A clock the test moves; the bot and the cloud sim read it. */
export interface TestClock {
  now(): Date;
  advance(ms: number): void;
  set(date: Date): void;
}

/** What a slash command led to: the HTTP answer (the ack) and the ids Slack handed the bot with it. */
export interface CommandResult extends SlackHttpResponse {
  triggerId: string;
  responseUrl: string;
}

export interface Harness {
  mode: SlackMode;
  bot: Running;
  sim: CloudSim;
  slack: SlackStandIn;
  clock: TestClock;
  policy: Policy;
  /** Redis key and BullMQ prefix of this bot (REDIS_PREFIX, in a hash tag on a cluster). */
  prefix: string;
  /** `POST /slack/events` of the bot (HTTP mode); in Socket Mode the health server's base URL. */
  eventsUrl: string;
  /** The bot's health routes' base URL (`/healthz`, `/readyz`). */
  baseUrl: string;
  signingSecret: string;
  /** Read access to the bot's state, for assertions. */
  store: RequestStore;
  queues: Queues;
  redis: RedisClient;
  /** The bot's log lines (JSON), for debugging and secret checks. */
  logs: string[];
  /** Sends a raw, form-encoded body to the bot, signed unless `sign` says otherwise (HTTP mode only). */
  send(body: string, sign?: Partial<SignOptions>): Promise<SlackHttpResponse>;
  /** `/cloud <text>` from `user` in `channel`. Checks blocks in the ack against the Block Kit schema. */
  command(text: string, user?: string, channel?: string, team?: string): Promise<CommandResult>;
  /** Any interaction payload, as Slack delivers it in this mode (signed HTTP or a Socket Mode envelope). */
  interaction(payload: Record<string, unknown>): Promise<SlackHttpResponse>;
  /** A button click; `message` is the message the button sits on (Slack echoes it back). */
  click(
    actionId: string,
    value: string,
    user: string,
    channel?: string,
    message?: { ts: string; text?: string; blocks?: unknown[] },
  ): Promise<SlackHttpResponse>;
  /** Submits `view` (as views.open returned it) with the inputs `values` by block_id; checks views in the answer. */
  submitView(
    view: Record<string, unknown>,
    values: Record<string, InputValue>,
    user: string,
  ): Promise<SlackHttpResponse>;
  /** The last view views.open (or views.push) set, waiting for it up to 5 s; `after` skips views already seen. */
  openedView(after?: number): Promise<SlackView>;
  /** Runs `/cloud <text>` and returns the modal it opened. */
  openModal(text: string, user?: string, channel?: string): Promise<Record<string, unknown>>;
  /** Runs `/cloud <text>`, fills the modal it opened with `values` and submits it as `user`; returns the ack. */
  fillAndSubmit(
    text: string,
    values: Record<string, InputValue>,
    user?: string,
    channel?: string,
  ): Promise<SlackHttpResponse>;
  /** How many acks (command answers, view responses) were checked against the schemas. */
  readonly acksChecked: number;
  /** The channel's requests, newest first, from the bot's store. */
  requests(channel?: string): Promise<CloudRequest[]>;
  /** The channel's newest request that this helper has not returned before, waiting up to 30 s for it. */
  nextRequest(channel?: string): Promise<CloudRequest>;
  /** The request once `predicate` holds (the bot acks before it finishes writing), waiting up to `timeoutMs`. */
  waitForRequest(
    id: string,
    predicate: (r: CloudRequest) => boolean,
    timeoutMs?: number,
  ): Promise<CloudRequest>;
  /**
   * The request's execute job, waiting up to 5 s: the handler adds it just after the state turns queued, so a test
   * that saw `queued` may look a moment too early.
   */
  waitForJob(id: string): Promise<Job>;
  /** The request message the bot posted for `request` (needs a worker: role `all` or `worker`); waits 8 s by default. */
  requestMessage(
    requestId: string,
    predicate?: (m: { text?: string; blocks?: unknown[] }) => boolean,
    timeoutMs?: number,
  ): Promise<{ ts: string; text?: string; blocks?: unknown[] }>;
  /** A request's audit entries as "state actor detail" lines, oldest first. */
  auditOf(requestId: string): Promise<string[]>;
  /**
   * Stops the bot and starts it again on the same Redis, clock, cloud sim and Slack stand-in (a new port); with
   * `policyYaml`, on that policy from now on (an operator's edit of the policy file, then a restart).
   */
  restart(policyYaml?: string): Promise<void>;
  /**
   * Writes `policyYaml` to the bot's policy file and reloads it, as SIGHUP does (docs/policy.md#reload); needs
   * `policyFile`. Resolves with what the reload did.
   */
  reloadPolicy(policyYaml: string): Promise<string>;
  close(): Promise<void>;
}

/**
 * Starts the cloud sim, the Slack stand-in and the whole bot (`startCloudops`) in HTTP mode on port 0, with a
 * unique Redis prefix; helpers send signed slash commands, clicks and view submissions as Slack does.
 */
export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const start = options.now ?? new Date();
  let current = start.getTime();
  const clock: TestClock = {
    now: () => new Date(current),
    advance: (ms) => {
      current += ms;
    },
    set: (date) => {
      current = date.getTime();
    },
  };
  const policyYaml =
    typeof options.policyYaml === 'function'
      ? options.policyYaml(start)
      : (options.policyYaml ?? defaultPolicyYaml(start));
  let policy = parsePolicy(policyYaml, 'test-policy.yml');
  const signingSecret = randomBytes(16).toString('hex');
  const botToken = `xoxb-test-${randomBytes(8).toString('hex')}`;
  const appToken = `xapp-1-test-${randomBytes(8).toString('hex')}`;
  const mode = options.mode ?? testSlackMode();
  const envPrefix = uniquePrefix('slack');

  const sim = await startCloudSim({ now: clock.now, seed: options.simSeed });
  const slack = await startSlackStandIn({ botToken, appToken, teamId: TEAM });
  for (const [group, members] of Object.entries(options.userGroups ?? {})) slack.setUserGroup(group, members);
  const logs: string[] = [];
  const env = loadEnv({
    SLACK_BOT_TOKEN: botToken,
    SLACK_SIGNING_SECRET: signingSecret,
    SLACK_APP_TOKEN: mode === 'socket' ? appToken : undefined,
    SLACK_API_URL: slack.apiUrl,
    CLOUD_API_URL: sim.url,
    CLOUD_API_KEY: sim.apiKey,
    SEAL_KEY: TEST_SEAL_KEY,
    REDIS_URL: testRedisUrl(),
    REDIS_PREFIX: envPrefix,
    PORT: '0',
    METRICS_PORT: '0',
    ROLE: options.role ?? 'web',
    LOG_LEVEL: 'warn',
    ...(await options.env?.(sim)),
  });
  const prefix = redisKeyPrefix(env);
  const logger = createLogger(
    { level: options.logLevel ?? 'warn', secrets: [botToken, appToken, signingSecret, sim.apiKey] },
    { write: (line: string) => void logs.push(line) },
  );
  let bot: Running;
  // A reloadable policy lives in a file of its own, removed with the harness.
  const policyDir = options.policyFile ? await mkdtemp(join(tmpdir(), 'cloudops-harness-')) : undefined;
  const policyPath = policyDir && join(policyDir, 'policy.yml');
  if (policyPath) await writeFile(policyPath, policyYaml);
  const startBot = async () =>
    startCloudops(env, policyPath ? await FilePolicySource.open(policyPath) : policy, {
      now: clock.now,
      logger,
      stalledIntervalMs: 2000,
      shutdownTimeoutMs: 5000,
      reconnectPolicy: TEST_RECONNECT_POLICY,
      // Slack's views.publish rate as the stand-in counts it (100 a minute): tests that do not look at the budget's
      // short windows (test/e2e/slack-home-limits.test.ts does) are not slowed by them.
      homeRate: TEST_HOME_RATE,
      // Every open of the Home tab publishes: the tests wait for each open's page, and a second open of an unchanged
      // home within the bot's two seconds rightly publishes nothing (test/e2e/slack-home-limits.test.ts sets the
      // window back and tests it).
      homeOpenCoalesceMs: 0,
      ...options.startOptions,
    });
  try {
    bot = await startBot();
  } catch (error) {
    await Promise.all([sim.close(), slack.close()]);
    throw error;
  }
  const redis = options.redisTarget
    ? createRedis(options.redisTarget, { maxRetriesPerRequest: null })
    : new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
  const store = new RequestStore(redis, { prefix, now: clock.now });
  const queues = createQueues(redis, prefix);
  let baseUrl = `http://127.0.0.1:${bot.port}`;
  let eventsUrl = `${baseUrl}/slack/events`;

  const send = (body: string, sign: Partial<SignOptions> = {}) => {
    if (mode === 'socket') throw new Error('h.send posts signed HTTP: the harness runs in Socket Mode');
    return postSigned(eventsUrl, body, { secret: signingSecret, ...sign });
  };
  /** A command or an interaction as Slack sends it in this mode: signed HTTP, or an envelope on the socket. */
  const deliver = async (
    kind: 'command' | 'interaction',
    payload: Record<string, unknown>,
  ): Promise<SlackHttpResponse> => {
    if (mode === 'http') {
      const body =
        kind === 'command'
          ? new URLSearchParams(payload as Record<string, string>).toString()
          : interactionBody(payload);
      return send(body);
    }
    const ack = await slack.socket.deliver(kind === 'command' ? 'slash_commands' : 'interactive', payload);
    return { status: 200, text: ack.payload ? JSON.stringify(ack.payload) : '', json: ack.payload };
  };
  const origin = (user: string, channel: string, teamId = TEAM): SlackOrigin => ({ user, channel, teamId });
  /** An ack's body reached Slack too: check its blocks and views like the Web API calls. */
  let acksChecked = 0;
  const returned = new Set<string>();
  const checkAck = (response: SlackHttpResponse) => {
    const json = response.json;
    if (!json) return;
    acksChecked += 1;
    // The Socket Mode stand-in checks the acks it reads itself.
    if (mode === 'socket') return;
    if (json.blocks !== undefined) slack.checkPayload('ack', { blocks: json.blocks });
    if (json.view !== undefined) slack.checkPayload('ack', { view: json.view });
  };

  const harness: Harness = {
    mode,
    bot,
    sim,
    slack,
    clock,
    policy,
    prefix,
    eventsUrl,
    baseUrl,
    signingSecret,
    store,
    queues,
    redis,
    logs,
    send,
    async command(text, user = USERS.dev, channel = CHANNELS.prod, team = TEAM) {
      const triggerId = slack.triggerId();
      const responseUrl = slack.responseUrl({ channel, user });
      const response = await deliver(
        'command',
        Object.fromEntries(
          new URLSearchParams(
            slashCommandBody(origin(user, channel, team), { text, triggerId, responseUrl }),
          ),
        ),
      );
      checkAck(response);
      return { ...response, triggerId, responseUrl };
    },
    interaction: (payload) => deliver('interaction', payload),
    async click(actionId, value, user, channel = CHANNELS.prod, message) {
      const payload = blockActionsPayload(origin(user, channel), {
        actionId,
        value,
        blockId: `request:${value}`,
        triggerId: slack.triggerId(),
        responseUrl: slack.responseUrl({ channel, user, messageTs: message?.ts }),
        message,
      });
      const response = await deliver('interaction', payload);
      checkAck(response);
      return response;
    },
    async submitView(view, values, user) {
      const payload = viewSubmissionPayload(
        origin(user, CHANNELS.prod),
        view,
        viewState(view, values),
        slack.triggerId(),
      );
      const response = await deliver('interaction', payload);
      checkAck(response);
      return response;
    },
    openedView(after = 0) {
      return slack.waitFor(() => {
        const opened = slack.views.slice(after).filter((v) => v.method !== 'views.update');
        return opened[opened.length - 1];
      });
    },
    async openModal(text, user = USERS.dev, channel = CHANNELS.prod) {
      const seen = slack.views.length;
      const result = await harness.command(text, user, channel);
      if (result.status !== 200) throw new Error(`/cloud ${text}: HTTP ${result.status}`);
      if (result.json?.text)
        throw new Error(`/cloud ${text} answered instead of opening a modal: ${String(result.json.text)}`);
      return (await harness.openedView(seen)).view;
    },
    async fillAndSubmit(text, values, user = USERS.dev, channel = CHANNELS.prod) {
      const view = await harness.openModal(text, user, channel);
      return harness.submitView(view, values, user);
    },
    get acksChecked() {
      return acksChecked;
    },
    requests(channel = CHANNELS.prod) {
      return store.listByChannel(channel, 50);
    },
    async nextRequest(channel = CHANNELS.prod) {
      const deadline = Date.now() + WAIT_MS;
      for (;;) {
        // The injected clock may stand still, so creation times tie: "new" means not returned before.
        const fresh = (await store.listByChannel(channel, 1000)).find((r) => !returned.has(r.id));
        if (fresh) {
          returned.add(fresh.id);
          return fresh;
        }
        if (Date.now() > deadline) throw new Error(`no request in ${channel}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    async waitForRequest(id, predicate, timeoutMs = WAIT_MS) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const request = await store.get(id);
        if (request && predicate(request)) return request;
        if (Date.now() > deadline)
          throw new Error(`request ${id} is ${request?.state ?? 'missing'}, still not as expected`);
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    async waitForJob(id) {
      const deadline = Date.now() + WAIT_MS;
      for (;;) {
        const job = await queues.execute.getJob(id);
        if (job) return job;
        if (Date.now() > deadline) throw new Error(`no execute job for ${id}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    async requestMessage(requestId, predicate = () => true, timeoutMs = WAIT_MS) {
      const found = await slack.waitFor(
        () =>
          slack
            .messages()
            .find(
              (m) =>
                m.thread_ts === undefined &&
                (m.text ?? '').includes(`(request ${requestId})`) &&
                predicate(m),
            ),
        timeoutMs,
      );
      return { ts: found.ts, text: found.text, blocks: found.blocks };
    },
    async auditOf(requestId) {
      const out: string[] = [];
      for await (const entry of exportAudit(redis, prefix)) {
        if (entry.requestId === requestId)
          out.push(`${entry.state} ${entry.actor}${entry.detail ? ` ${entry.detail}` : ''}`);
      }
      return out;
    },
    async restart(edited) {
      await bot.stop();
      if (edited !== undefined) policy = parsePolicy(edited, 'test-policy.yml');
      if (edited !== undefined && policyPath) await writeFile(policyPath, edited);
      bot = await startBot();
      baseUrl = `http://127.0.0.1:${bot.port}`;
      eventsUrl = `${baseUrl}/slack/events`;
      Object.assign(harness, { bot, baseUrl, eventsUrl, policy });
    },
    async reloadPolicy(edited) {
      if (!policyPath) throw new Error('h.reloadPolicy needs the harness option policyFile');
      await writeFile(policyPath, edited);
      const outcome = await bot.reloadPolicy('test');
      policy = parsePolicy(edited, 'test-policy.yml');
      Object.assign(harness, { policy });
      return outcome.kind;
    },
    async close() {
      await bot.stop();
      if (policyDir) await rm(policyDir, { recursive: true, force: true });
      await queues.close().catch(() => undefined);
      await deleteKeys(redis, prefix);
      await redis.quit();
      await Promise.all([sim.close(), slack.close()]);
    },
  };
  return harness;
}
