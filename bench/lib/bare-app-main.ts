import { App, HTTPReceiver, LogLevel } from '@slack/bolt';
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';

/**
 * The footprint baseline, run as its own process: a bare Bolt app (same receiver, ack-only handlers, /readyz) and a
 * bare BullMQ worker on one Redis connection; the least a bot of this shape holds in memory.
 */
const port = Number(process.env.PORT ?? 0);
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
const worker = new Worker('bare', async () => undefined, {
  connection: redis,
  prefix: process.env.REDIS_PREFIX ?? 'bare',
  concurrency: 4,
});
const receiver = new HTTPReceiver({
  signingSecret: process.env.SLACK_SIGNING_SECRET ?? 'bare',
  endpoints: '/slack/events',
  logLevel: LogLevel.ERROR,
  customRoutes: [
    {
      path: '/readyz',
      method: ['GET'],
      handler: (_req, res) => {
        void redis.ping().then(
          () => res.writeHead(200).end('ready'),
          () => res.writeHead(503).end('not ready'),
        );
      },
    },
  ],
});
const app = new App({
  token: 'xoxb-bare',
  receiver,
  logLevel: LogLevel.ERROR,
  tokenVerificationEnabled: false,
  botId: 'B0BARE',
  botUserId: 'U0BARE',
});
app.command('/cloud', async ({ ack }) => ack());
app.action('approve', async ({ ack }) => ack());
await worker.waitUntilReady();
await receiver.start({ port, host: '127.0.0.1' });
process.once('SIGTERM', () => {
  void Promise.all([receiver.stop(), worker.close()]).then(async () => {
    await redis.quit();
    process.exit(0);
  });
});
