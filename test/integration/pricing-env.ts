import { Redis } from 'ioredis';
import { pino } from 'pino';
import { type CloudSim, startCloudSim } from '../../sim/cloud/server.ts';
import { type SlackMessage, type SlackStandIn, startSlackStandIn } from '../../sim/slack/server.ts';
import { CloudApiClient, FAST_TIMEOUTS } from '../../src/cloud/client.ts';
import { parsePolicy } from '../../src/config/policy.ts';
import { createDigestJobs, type DigestJobs } from '../../src/jobs/digests.ts';
import { parseDigestCommand } from '../../src/pricing/schedule-parse.ts';
import { digestRenderer } from '../../src/slack/blocks/digest.ts';
import { SlackApi } from '../../src/slack-api/client.ts';
import { deleteKeys, testRedisUrl, uniquePrefix } from '../helpers/redis.ts';

export const policy = parsePolicy('currency: EUR\nreference_vm: { cores: 2, ram_gb: 4, os_disk_gb: 50 }\n');
/** A digest every second (allowed in tests with minIntervalMs 0). */
export const EVERY_SECOND = (() => {
  const parsed = parseDigestCommand(['cron', '*/1 * * * * *', 'UTC'], { minIntervalMs: 0 });
  if (parsed.action !== 'subscribe') throw new Error('test schedule does not parse');
  return parsed.schedule;
})();

/** One running pricing part and how to stop it. */
export interface Instance {
  pricing: DigestJobs;
  close(): Promise<void>;
}

/** What each test gets: fresh sims, a unique prefix, and the instances it started (closed after it). */
export interface PricingEnv {
  sim: CloudSim;
  standIn: SlackStandIn;
  prefix: string;
  admin: Redis;
  instances: Instance[];
}

export const env = {} as PricingEnv;

/** One bot process's pricing part: its own Redis connection, cloud client and Slack client. */
export async function startInstance(
  options: { worker?: boolean; concurrency?: number } = {},
): Promise<Instance> {
  const connection = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
  const cloud = new CloudApiClient({ baseUrl: env.sim.url, apiKey: env.sim.apiKey, timeouts: FAST_TIMEOUTS });
  const slack = new SlackApi({ apiUrl: env.standIn.apiUrl, token: env.standIn.botToken });
  const pricing = createDigestJobs({
    policy,
    cloud,
    connection,
    prefix: env.prefix,
    slack,
    renderer: digestRenderer,
    now: () => new Date(),
    logger: pino({ level: 'silent' }),
    concurrency: options.concurrency,
  });
  const worker = options.worker === false ? undefined : pricing.startWorker();
  await pricing.startScheduler();
  let closed = false;
  const instance = {
    pricing,
    async close() {
      if (closed) return;
      closed = true;
      await worker?.close();
      await pricing.close();
      await cloud.close();
      await slack.close();
      await connection.quit();
    },
  };
  env.instances.push(instance);
  return instance;
}

export const digests = (channel: string): SlackMessage[] =>
  env.standIn.messages(channel).filter((m) => (m.text ?? '').startsWith('Pricing digest'));
export const blocksText = (m: SlackMessage) => JSON.stringify(m.blocks ?? []);
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Call from beforeEach. */
export async function setUpPricingEnv(): Promise<void> {
  env.prefix = uniquePrefix('pricing');
  env.admin = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
  env.sim = await startCloudSim();
  env.standIn = await startSlackStandIn();
  env.instances = [];
}

/** Call from afterEach: closes what the test started and deletes its keys. */
export async function tearDownPricingEnv(): Promise<void> {
  for (const instance of env.instances) await instance.close();
  await Promise.all([env.sim.close(), env.standIn.close()]);
  await deleteKeys(env.admin, env.prefix);
  await env.admin.quit();
}
