import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { Pool, request } from 'undici';
import { freePort } from '../../sim/local-redis.ts';
import { type ReadyChild, spawnReady } from './child.ts';
import { BENCH } from './identity.ts';
import { forEachParallel } from './parallel.ts';
import type { Sims } from './sims.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The bare Bolt + BullMQ app (bare-flow-main.ts) running in a process of its own. */
export interface BareFlow {
  /** Where Slack posts commands, submissions and clicks. */
  eventsUrl: string;
  /** Its own port: `/readyz`, and `/memory` (process and V8 heap figures). */
  port: number;
  child: ReadyChild;
  /** CPU time the app has used so far (its own process.cpuUsage(), µs precision), ms. */
  cpuMs(): Promise<number>;
}

/**
 * Starts bench/lib/bare-flow-main.ts on the simulators (Node strips its types, no loader). `nodeArgs`: Node's flags,
 * the same as the bot it is compared with runs on, so a ratio compares the code, not V8's settings.
 */
export async function startBareFlow(options: {
  sims: Sims;
  redisUrl: string;
  prefix: string;
  readyTimeoutMs: number;
  logFile: string;
  nodeArgs: string[];
  /** More environment (such as MALLOC_ARENA_MAX), as the bot it is compared with gets. */
  env?: Record<string, string>;
}): Promise<BareFlow> {
  const { sims } = options;
  const port = await freePort();
  const child = await spawnReady({
    script: 'bench/lib/bare-flow-main.ts',
    nodeArgs: options.nodeArgs,
    env: {
      PORT: String(port),
      REDIS_URL: options.redisUrl,
      REDIS_PREFIX: options.prefix,
      SLACK_BOT_TOKEN: BENCH.botToken,
      SLACK_SIGNING_SECRET: BENCH.signingSecret,
      SLACK_API_URL: sims.slackApiUrl,
      CLOUD_API_URL: sims.cloudUrl,
      CLOUD_API_KEY: sims.cloudApiKey,
      PROJECT_UUID: sims.projectUuid,
      ...options.env,
    },
    readyUrl: `http://127.0.0.1:${port}/readyz`,
    timeoutMs: options.readyTimeoutMs,
    logFile: options.logFile,
    cwd: ROOT,
  });
  return {
    eventsUrl: `http://127.0.0.1:${port}/slack/events`,
    port,
    child,
    async cpuMs() {
      const answer = await request(`http://127.0.0.1:${port}/memory`);
      const { cpu } = (await answer.body.json()) as { cpu: { user: number; system: number } };
      return (cpu.user + cpu.system) / 1000;
    },
  };
}

/**
 * Posts one message per VM in the bench channel as the bare app's own request messages (the bench does it directly
 * on the Slack stand-in, as it does for the bot's): each click then names a real message, and its reply threads under
 * it. Returns the messages' ts, in the order of `vmids`.
 */
export async function postBareMessages(sims: Sims, vmids: number[]): Promise<string[]> {
  const api = new URL(sims.slackApiUrl);
  const out: string[] = [];
  for (const vmid of vmids) {
    const response = await fetch(`${api.origin}${api.pathname}chat.postMessage`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${BENCH.botToken}`,
        'content-type': 'application/json; charset=utf-8',
      },
      body: JSON.stringify({ channel: BENCH.channel, text: `Resize bench / VM ${vmid}` }),
    });
    const answer = (await response.json()) as { ok: boolean; ts?: string; error?: string };
    if (!answer.ok || !answer.ts) throw new Error(`bare flow: chat.postMessage: ${answer.error}`);
    out.push(answer.ts);
  }
  return out;
}

/** What `count` approved requests cost the bare app: its worker's POST and thread reply per job. */
export interface BareFlowPipelineResult {
  jobs: number;
  elapsedMs: number;
  perSecond: number;
  /** The bare app's CPU from the first job added to the last reply, per job (ms). */
  cpuMsPerJob: number;
}

/**
 * The bare app's side of the pipeline: its messages are posted (setup, not measured), then `count` jobs are added to
 * its queue as its Approve clicks would add them, and the run lasts until every thread reply reached the stand-in.
 * CPU is the bare app's process only, read from it before the first add and after the last reply.
 */
export async function runBareFlowPipeline(options: {
  flow: BareFlow;
  sims: Sims;
  redis: Redis;
  prefix: string;
  vmids: number[];
  timeoutMs: number;
}): Promise<BareFlowPipelineResult> {
  const { sims, vmids } = options;
  const count = vmids.length;
  const api = new URL(sims.slackApiUrl);
  const pool = new Pool(api.origin, { connections: 20 });
  const ts = new Map<number, string>();
  try {
    await forEachParallel(vmids, 20, async (vmid) => {
      const response = await pool.request({
        method: 'POST',
        path: `${api.pathname}chat.postMessage`,
        headers: {
          authorization: `Bearer ${BENCH.botToken}`,
          'content-type': 'application/json; charset=utf-8',
        },
        body: JSON.stringify({ channel: BENCH.channel, text: `Resize bench / VM ${vmid}` }),
      });
      const answer = (await response.body.json()) as { ok: boolean; ts?: string; error?: string };
      if (!answer.ok || !answer.ts) throw new Error(`bare flow setup: chat.postMessage: ${answer.error}`);
      ts.set(vmid, answer.ts);
    });
  } finally {
    await pool.close();
  }
  // The queue and job shape of bare-flow-main.ts's Approve handler.
  const queue = new Queue('resize', { connection: options.redis, prefix: options.prefix });
  try {
    const before = await sims.threadReplies();
    const cpuBefore = await options.flow.cpuMs();
    const started = performance.now();
    const jobs = vmids.map((vmid) => ({
      name: 'resize',
      data: { vmid, cores: 4, channel: BENCH.channel, ts: ts.get(vmid) ?? '' },
    }));
    for (let i = 0; i < jobs.length; i += 500) await queue.addBulk(jobs.slice(i, i + 500));
    const deadline = started + options.timeoutMs;
    let replies = 0;
    for (;;) {
      replies = (await sims.threadReplies()) - before;
      if (replies >= count || performance.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const elapsedMs = performance.now() - started;
    const cpuAfter = await options.flow.cpuMs();
    if (replies < count)
      throw new Error(
        `bare flow pipeline: only ${replies} of ${count} thread replies within ${options.timeoutMs} ms`,
      );
    return {
      jobs: count,
      elapsedMs,
      perSecond: (count * 1000) / elapsedMs,
      cpuMsPerJob: (cpuAfter - cpuBefore) / count,
    };
  } finally {
    await queue.close();
  }
}
