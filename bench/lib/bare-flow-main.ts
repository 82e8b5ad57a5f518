import { getHeapSpaceStatistics } from 'node:v8';
import { App, HTTPReceiver, LogLevel } from '@slack/bolt';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { request } from 'undici';

/**
 * The steady-load baseline, run as its own process without a loader (Node strips the types): a bare Bolt app and
 * BullMQ doing the hops a resize takes through the bot, and nothing else. `/cloud resize <project> <vmid> cores=N`
 * opens a modal (views.open); its submission posts a request message with an Approve button (chat.postMessage);
 * the click adds a job; the worker POSTs the resize to the cloud API and replies in the message's thread.
 */
const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};
const port = Number(process.env.PORT ?? 0);
const cloudUrl = env('CLOUD_API_URL').replace(/\/$/, '');
const cloudKey = env('CLOUD_API_KEY');
const projectUuid = env('PROJECT_UUID');
const prefix = process.env.REDIS_PREFIX ?? 'bare-flow';
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });

const receiver = new HTTPReceiver({
  signingSecret: env('SLACK_SIGNING_SECRET'),
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
    {
      // What the bot's /metrics says as nodejs_heap_size_*: the bench reads both the same way; and the CPU used.
      path: '/memory',
      method: ['GET'],
      handler: (_req, res) => {
        const body = { ...process.memoryUsage(), spaces: getHeapSpaceStatistics(), cpu: process.cpuUsage() };
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      },
    },
  ],
});
const app = new App({
  token: env('SLACK_BOT_TOKEN'),
  receiver,
  logLevel: LogLevel.ERROR,
  tokenVerificationEnabled: false,
  botId: 'B0BARE',
  botUserId: 'U0BARE',
  clientOptions: { slackApiUrl: env('SLACK_API_URL') },
});

interface ResizeJob {
  vmid: number;
  cores: number;
  channel: string;
  ts: string;
}
const queue = new Queue<ResizeJob>('resize', { connection: redis, prefix });
const worker = new Worker<ResizeJob>(
  'resize',
  async (job) => {
    const { vmid, cores, channel, ts } = job.data;
    const response = await request(`${cloudUrl}/cloud/project/${projectUuid}/vm/${vmid}/upgrade/`, {
      method: 'POST',
      headers: { authorization: `Bearer ${cloudKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ cores }),
    });
    const answer = await response.body.text();
    await app.client.chat.postMessage({
      channel,
      thread_ts: ts,
      text: response.statusCode === 200 ? `Resized VM ${vmid}` : `Resize of VM ${vmid} failed: ${answer}`,
    });
  },
  {
    connection: redis,
    prefix,
    concurrency: 4,
    removeOnComplete: { count: 100 },
    removeOnFail: { count: 100 },
  },
);

app.command('/cloud', async ({ ack, command, client }) => {
  await ack();
  const [, , vmid, coresArg] = command.text.split(/\s+/);
  const cores = Number(coresArg?.split('=')[1] ?? 4);
  await client.views.open({
    trigger_id: command.trigger_id,
    view: {
      type: 'modal',
      callback_id: 'bare_resize',
      private_metadata: JSON.stringify({ vmid: Number(vmid), cores, channel: command.channel_id }),
      title: { type: 'plain_text', text: 'Resize a VM' },
      submit: { type: 'plain_text', text: 'Request' },
      close: { type: 'plain_text', text: 'Cancel' },
      blocks: [
        {
          type: 'input',
          block_id: 'reason',
          label: { type: 'plain_text', text: 'Reason' },
          element: { type: 'plain_text_input', action_id: 'reason', multiline: true },
        },
      ],
    },
  });
});

app.view('bare_resize', async ({ ack, view, client }) => {
  await ack();
  const { vmid, cores, channel } = JSON.parse(view.private_metadata) as {
    vmid: number;
    cores: number;
    channel: string;
  };
  const value = `${vmid}.${cores}`;
  await client.chat.postMessage({
    channel,
    text: `Resize bench / VM ${vmid} (request ${value})`,
    blocks: [
      { type: 'section', text: { type: 'mrkdwn', text: `Resize bench / VM ${vmid} to ${cores} cores` } },
      {
        type: 'actions',
        block_id: `request:${value}`,
        elements: [
          { type: 'button', action_id: 'approve', text: { type: 'plain_text', text: 'Approve' }, value },
        ],
      },
    ],
  });
});

app.action('approve', async ({ ack, body, action }) => {
  await ack();
  const [vmid, cores] = ((action as { value?: string }).value ?? '').split('.').map(Number);
  const b = body as { channel?: { id: string }; container?: { message_ts?: string } };
  await queue.add('resize', {
    vmid: vmid ?? 0,
    cores: cores ?? 4,
    channel: b.channel?.id ?? '',
    ts: b.container?.message_ts ?? '',
  });
});

await worker.waitUntilReady();
await receiver.start({ port, host: '127.0.0.1' });
process.once('SIGTERM', () => {
  void Promise.all([receiver.stop(), worker.close(), queue.close()]).then(async () => {
    await redis.quit();
    process.exit(0);
  });
});
