/**
 * The clients of the outside services, built the same way by the bot's core and by `cloudops mcp`: the cloud API,
 * the Slack Web API, and the BullMQ queues on Redis.
 */
import { CloudApiClient, DEFAULT_TIMEOUTS } from '../cloud/client.ts';
import type { Env } from '../config/env.ts';
import type { RedisClient } from '../config/redis-connection.ts';
import { createQueues, type Queues } from '../jobs/queues.ts';
import type { Logger } from '../observability/logger.ts';
import { type Metrics, statusLabel } from '../observability/metrics.ts';
import { SlackApi } from '../slack-api/client.ts';

/** The cloud API client at CLOUD_API_URL; with `metrics`, each call's latency is observed. */
export function openCloudClient(env: Env, metrics?: Metrics): CloudApiClient {
  return new CloudApiClient({
    baseUrl: env.CLOUD_API_URL ?? '',
    apiKey: env.CLOUD_API_KEY,
    timeouts: { ...DEFAULT_TIMEOUTS, totalMs: env.CLOUD_API_DEADLINE_MS },
    proxy: env,
    onCall: metrics
      ? (call) =>
          metrics.apiLatency.observe(
            { operation: call.operation, status: statusLabel(call.status), outcome: call.outcome },
            call.durationMs / 1000,
          )
      : undefined,
  });
}

/** The Slack Web API client. Reports are retried by their own queues, so it neither retries nor waits out rate limits. */
export function openSlackApi(env: Env, logger: Logger): SlackApi {
  return new SlackApi({ apiUrl: env.SLACK_API_URL, token: env.SLACK_BOT_TOKEN ?? '', logger, proxy: env });
}

/**
 * The queues on the waiting connection; with `onError`, their connection errors go to the bot's log (without a
 * listener BullMQ prints them to the console, outside the redacted JSON log).
 */
export function openQueues(
  queueRedis: RedisClient,
  prefix: string,
  onError?: (error: Error, queue: string) => void,
): Queues {
  const queues = createQueues(queueRedis, prefix);
  if (onError)
    for (const queue of [queues.execute, queues.notify]) {
      queue.on('error', (error: Error) => onError(error, queue.name));
    }
  return queues;
}
