import { BENCH, benchPolicyYaml } from './identity.ts';
import { forkProc } from './proc.ts';
import type { SimsStarted } from './sims-protocol.ts';

/** A bot started in a process of its own (bot-child.ts), on loopback, against the simulators. */
export interface BenchBot {
  /** `http://127.0.0.1:PORT/slack/events` */
  eventsUrl: string;
  baseUrl: string;
  pid: number;
  /** CPU time the bot's process has used so far (ms). */
  cpuMs(): Promise<number>;
  /** Moves the bot's clock forward by `ms`. */
  advanceClock(ms: number): Promise<void>;
  /** One retention round, finished jobs of any age included. */
  sweepFinished(): Promise<{ requests: number; jobs: number }>;
  stop(): Promise<void>;
}

/** What bot-child.ts is started with. */
export interface BotStartOp {
  env: Record<string, string>;
  policyYaml: string;
  logLevel: string;
  logFile: string;
  secrets: string[];
  fastRetention: boolean;
  /** Jobs at once per queue in this process (the bot's default when absent). */
  concurrency?: { execute: number; notify: number };
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
    /** More variables, such as the OTEL_* ones. */
    env?: Record<string, string>;
  },
): Record<string, string> {
  return {
    SLACK_BOT_TOKEN: BENCH.botToken,
    SLACK_SIGNING_SECRET: BENCH.signingSecret,
    SLACK_API_URL: sims.slackApiUrl,
    CLOUD_API_URL: sims.cloudUrl,
    CLOUD_API_KEY: sims.cloudApiKey,
    SEAL_KEY: BENCH.sealKey,
    REDIS_URL: options.redisUrl,
    REDIS_PREFIX: options.prefix,
    PORT: String(options.port ?? 0),
    METRICS_PORT: '0',
    ROLE: options.role,
    LOG_LEVEL: options.logLevel,
    ...(options.policyFile ? { POLICY_FILE: options.policyFile } : {}),
    ...options.env,
  };
}

/**
 * Forks bot-child.ts and starts `startCloudops` in it with the bench policy (`policyPrefix` lines first, e.g.
 * `retention_days: 30`); its logs go to `logFile` at `logLevel`.
 */
export async function startBenchBot(
  sims: SimsStarted,
  options: {
    redisUrl: string;
    prefix: string;
    role: 'all' | 'web' | 'worker';
    logLevel: string;
    logFile: string;
    policyPrefix?: string;
    fastRetention?: boolean;
    concurrency?: { execute: number; notify: number };
    /** More variables, such as the OTEL_* ones. */
    env?: Record<string, string>;
  },
): Promise<BenchBot> {
  const proc = forkProc(new URL('./bot-child.ts', import.meta.url), `bot (${options.role})`);
  let port: number | null;
  try {
    ({ port } = await proc.call<{ port: number | null }>(
      {
        op: 'start',
        env: benchEnv(sims, options),
        policyYaml: `${options.policyPrefix ?? ''}${benchPolicyYaml(sims.projectUuid)}`,
        logLevel: options.logLevel,
        logFile: options.logFile,
        secrets: [BENCH.botToken, BENCH.signingSecret, sims.cloudApiKey],
        fastRetention: options.fastRetention ?? false,
        concurrency: options.concurrency,
      } satisfies BotStartOp & { op: string },
      120_000,
    ));
  } catch (error) {
    await proc.close(1000);
    throw error;
  }
  const baseUrl = `http://127.0.0.1:${port ?? 0}`;
  return {
    eventsUrl: `${baseUrl}/slack/events`,
    baseUrl,
    pid: proc.pid,
    cpuMs: () => proc.cpuMs(),
    advanceClock: async (ms) => void (await proc.call({ op: 'advanceClock', ms })),
    sweepFinished: () => proc.call({ op: 'sweepFinished' }),
    stop: () => proc.close(),
  };
}
