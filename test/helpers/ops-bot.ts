import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { type CloudSim, startCloudSim } from '../../sim/cloud/server.ts';
import { type SlackStandIn, startSlackStandIn } from '../../sim/slack/server.ts';
import { loadEnv, type Role } from '../../src/config/env.ts';
import { type Policy, parsePolicy } from '../../src/config/policy.ts';
import { type Running, startCloudops } from '../../src/main.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { deleteKeys, uniquePrefix } from './redis.ts';
import { TEST_SEAL_KEY } from './seal.ts';
import { postSigned, type SignOptions, type SlackHttpResponse, slashCommandBody } from './slack-request.ts';

/** The team, channel and people of {@link OPS_POLICY}. */
export const OPS = { team: 'T0OPS', channel: 'C0OPS', dev: 'U0DEV', lead: 'U0LEAD' } as const;

/** A one-project policy on the cloud sim's default seed (project 0b6f…, VMs 101 and 102). */
export const OPS_POLICY = `
workspace: ${OPS.team}
currency: EUR
approvers: [${OPS.lead}]
projects:
  - name: shop-prod
    uuid: 0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10
    cluster: zone-1
    channels: [${OPS.channel}]
    vms:
      - { vmid: 101, name: web-1, ha: true, cores: 2, ram_gb: 4, os_disk_gb: 50, wan_mode: ipv4 }
      - { vmid: 102, name: db-1, cores: 4, ram_gb: 8, os_disk_gb: 100, wan_mode: ipv4 }
`;

/** The whole bot on the sims, with its log lines captured, for the ops tests (health, logs). */
export interface OpsBot {
  bot: Running;
  sim: CloudSim;
  slack: SlackStandIn;
  policy: Policy;
  prefix: string;
  /** Base URL of the bot's HTTP server (PORT). */
  url: string;
  /** Base URL of the bot's metrics server (METRICS_PORT on 127.0.0.1). */
  metricsUrl: string;
  /** Every log line the bot wrote (JSON). */
  logs: string[];
  /** The secrets the bot was configured with; none may appear in `logs`. */
  secrets: { botToken: string; signingSecret: string; apiKey: string };
  /** Sends a body to `POST /slack/events`, signed with the bot's secret unless `sign` says otherwise. */
  send(body: string, sign?: Partial<SignOptions>): Promise<SlackHttpResponse>;
  /** `/cloud <text>` from `user` in the policy's channel. */
  command(text: string, user?: string): Promise<SlackHttpResponse>;
  close(): Promise<void>;
}

/**
 * Starts the cloud sim, the Slack stand-in and `startCloudops` in HTTP mode on port 0 against `redisUrl`, with a
 * unique prefix, random secrets and a logger at `logLevel` that writes into memory.
 */
export async function startOpsBot(options: {
  redisUrl: string;
  role?: Role;
  logLevel?: string;
  now?: () => Date;
  /** The policy, when not {@link OPS_POLICY}. */
  policyYaml?: string;
}): Promise<OpsBot> {
  const secrets = {
    botToken: `xoxb-ops-${randomBytes(12).toString('hex')}`,
    signingSecret: randomBytes(20).toString('hex'),
    apiKey: `ck_${randomBytes(16).toString('hex')}`,
  };
  const prefix = uniquePrefix('ops');
  const policy = parsePolicy(options.policyYaml ?? OPS_POLICY, 'ops-policy.yml');
  const sim = await startCloudSim({ apiKey: secrets.apiKey, now: options.now });
  const slack = await startSlackStandIn({ botToken: secrets.botToken, teamId: OPS.team });
  const env = loadEnv({
    SLACK_BOT_TOKEN: secrets.botToken,
    SLACK_SIGNING_SECRET: secrets.signingSecret,
    SLACK_API_URL: slack.apiUrl,
    CLOUD_API_URL: sim.url,
    CLOUD_API_KEY: secrets.apiKey,
    SEAL_KEY: TEST_SEAL_KEY,
    REDIS_URL: options.redisUrl,
    REDIS_PREFIX: prefix,
    PORT: '0',
    METRICS_PORT: '0',
    ROLE: options.role ?? 'all',
    LOG_LEVEL: options.logLevel ?? 'warn',
  });
  const logs: string[] = [];
  const logger = createLogger(
    { level: env.LOG_LEVEL, secrets: [secrets.botToken, secrets.signingSecret, secrets.apiKey] },
    { write: (line: string) => void logs.push(line) },
  );
  let bot: Running;
  try {
    bot = await startCloudops(env, policy, {
      logger,
      now: options.now,
      shutdownTimeoutMs: 5000,
      stalledIntervalMs: 2000,
    });
  } catch (error) {
    await Promise.all([sim.close(), slack.close()]);
    throw error;
  }
  const url = `http://127.0.0.1:${bot.port}`;
  const send = (body: string, sign: Partial<SignOptions> = {}) =>
    postSigned(`${url}/slack/events`, body, { secret: secrets.signingSecret, ...sign });
  return {
    bot,
    sim,
    slack,
    policy,
    prefix,
    url,
    metricsUrl: `http://127.0.0.1:${bot.metricsPort}`,
    logs,
    secrets,
    send,
    command: (text, user = OPS.dev) =>
      send(
        slashCommandBody(
          { user, channel: OPS.channel, teamId: OPS.team },
          {
            text,
            triggerId: slack.triggerId(),
            responseUrl: slack.responseUrl({ channel: OPS.channel, user }),
          },
        ),
      ),
    async close() {
      await bot.stop();
      const redis = new Redis(options.redisUrl, { maxRetriesPerRequest: 1, lazyConnect: true });
      await redis
        .connect()
        .then(() => deleteKeys(redis, prefix))
        .catch(() => undefined);
      redis.disconnect();
      await Promise.all([sim.close(), slack.close()]);
    },
  };
}
