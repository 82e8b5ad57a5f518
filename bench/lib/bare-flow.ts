import { fileURLToPath } from 'node:url';
import { freePort } from '../../sim/local-redis.ts';
import { type ReadyChild, spawnReady } from './child.ts';
import { BENCH } from './identity.ts';
import type { Sims } from './sims.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The bare Bolt + BullMQ app (bare-flow-main.ts) running in a process of its own. */
export interface BareFlow {
  /** Where Slack posts commands, submissions and clicks. */
  eventsUrl: string;
  /** Its own port: `/readyz`, and `/memory` (process and V8 heap figures). */
  port: number;
  child: ReadyChild;
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
    },
    readyUrl: `http://127.0.0.1:${port}/readyz`,
    timeoutMs: options.readyTimeoutMs,
    logFile: options.logFile,
    cwd: ROOT,
  });
  return { eventsUrl: `http://127.0.0.1:${port}/slack/events`, port, child };
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
