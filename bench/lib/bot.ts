import { pino } from 'pino';
import { loadEnv } from '../../src/config/env.ts';
import { parsePolicy } from '../../src/config/policy.ts';
import type { Running } from '../../src/main.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { BENCH, benchPolicyYaml } from './identity.ts';
import type { SimsStarted } from './sims-protocol.ts';

/** A bot started in this process, on loopback, against the simulators. */
export interface BenchBot {
  /** `http://127.0.0.1:PORT/slack/events` */
  eventsUrl: string;
  baseUrl: string;
  running: Running;
  stop(): Promise<void>;
}

/** The environment the bot gets: the simulators, a unique prefix, port 0; as `npm start` would read it. */
export function benchEnv(
  sims: SimsStarted,
  options: {
    redisUrl: string;
    prefix: string;
    role: string;
    logLevel: string;
    port?: number;
    policyFile?: string;
  },
): Record<string, string> {
  return {
    SLACK_BOT_TOKEN: BENCH.botToken,
    SLACK_SIGNING_SECRET: BENCH.signingSecret,
    SLACK_API_URL: sims.slackApiUrl,
    CLOUD_API_URL: sims.cloudUrl,
    CLOUD_API_KEY: sims.cloudApiKey,
    REDIS_URL: options.redisUrl,
    REDIS_PREFIX: options.prefix,
    PORT: String(options.port ?? 0),
    METRICS_PORT: '0',
    ROLE: options.role,
    LOG_LEVEL: options.logLevel,
    ...(options.policyFile ? { POLICY_FILE: options.policyFile } : {}),
  };
}

/** Starts `startCloudops` in-process with the bench policy; its logs go to `logFile` at `logLevel`. */
export async function startBenchBot(
  sims: SimsStarted,
  options: {
    redisUrl: string;
    prefix: string;
    role: 'all' | 'web' | 'worker';
    logLevel: string;
    logFile: string;
  },
): Promise<BenchBot> {
  // Imported here so a scenario that does not need the bot runs even while the bot's modules are being written.
  const { startCloudops } = await import('../../src/main.ts');
  const env = loadEnv(benchEnv(sims, options));
  const policy = parsePolicy(benchPolicyYaml(sims.projectUuid), 'bench-policy.yml');
  const logger = createLogger(
    { level: options.logLevel, secrets: [BENCH.botToken, BENCH.signingSecret, sims.cloudApiKey] },
    pino.destination({ dest: options.logFile, append: true, sync: false, mkdir: true }),
  );
  const running = await startCloudops(env, policy, { logger, shutdownTimeoutMs: 5000 });
  if (!running.port) throw new Error('the bot did not report an HTTP port');
  const baseUrl = `http://127.0.0.1:${running.port}`;
  return {
    eventsUrl: `${baseUrl}/slack/events`,
    baseUrl,
    running,
    async stop() {
      await running.stop();
      logger.flush();
    },
  };
}
