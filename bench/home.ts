/**
 * The App Home's numbers: how long from a signed `app_home_opened` to the `views.publish` arriving at the Slack
 * stand-in, with 0, 30 and 300 requests waiting for the person (the page shows 30, counts the rest); how long from a
 * change (a Cancel click through signed HTTP) until the people concerned see their home published again (the
 * coalescing window included); and how many publishes a burst of changes makes. The whole bot in this process
 * (ROLE=all), a Redis of its own, the simulators in this process; medians with min–max. Writes
 * bench/home-results.json.
 *
 *   node --import tsx bench/home.ts [--opens 50] [--changes 20] [--burst 20]
 */
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { startCloudSim } from '../sim/cloud/server.ts';
import { startLocalRedis } from '../sim/local-redis.ts';
import { startSlackStandIn } from '../sim/slack/server.ts';
import { loadEnv } from '../src/config/env.ts';
import { parsePolicy } from '../src/config/policy.ts';
import { startCloudops } from '../src/main.ts';
import { createLogger } from '../src/observability/logger.ts';
import type { NewRequest } from '../src/requests/model/types.ts';
import { RequestStore } from '../src/requests/store/store.ts';
import { benchEnv } from './lib/bot.ts';
import { BENCH, benchPolicyYaml } from './lib/identity.ts';
import { sign } from './lib/slack-request.ts';
import { roundedSpread } from './lib/stats.ts';

const { values } = parseArgs({
  options: {
    opens: { type: 'string', default: '50' },
    changes: { type: 'string', default: '20' },
    burst: { type: 'string', default: '20' },
  },
});
const OPENS = Number(values.opens);
const CHANGES = Number(values.changes);
const BURST = Number(values.burst);
const PROJECT_UUID = '0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10';
const PREFIX = 'bench-home';

const redisServer = await startLocalRedis();
const sim = await startCloudSim();
// Slack's rate for views.publish (the stand-in's 100 a minute) lifted: this measures latency, not the limit.
const slack = await startSlackStandIn({
  botToken: BENCH.botToken,
  teamId: BENCH.teamId,
  publishPerMinute: 1e6,
});
const logger = createLogger({ level: 'warn', secrets: [BENCH.botToken, BENCH.signingSecret] });
const env = loadEnv(
  benchEnv(
    { slackApiUrl: slack.apiUrl, cloudUrl: sim.url, cloudApiKey: sim.apiKey, projectUuid: PROJECT_UUID },
    { redisUrl: redisServer.url, prefix: PREFIX, role: 'all', logLevel: 'warn' },
  ),
);
// The bot's own views.publish budget lifted and every open published (the same page opened again is otherwise left
// alone for 2 s): this measures what a page costs to build and publish.
const bot = await startCloudops(env, parsePolicy(benchPolicyYaml(PROJECT_UUID), 'bench-policy.yml'), {
  logger,
  homeRate: { max: 1e6, duration: 1000 },
  homeOpenCoalesceMs: 0,
});
const redis = new Redis(redisServer.url);
const store = new RequestStore(redis, { prefix: PREFIX });
const events = `http://127.0.0.1:${bot.port}/slack/events`;

/** A pending resize by the bench requester, waiting for the bench approver (setup: straight into the store). */
function pending(vmid: number): NewRequest {
  return {
    kind: 'resize',
    state: 'pending',
    teamId: BENCH.teamId,
    channel: BENCH.channel,
    projectName: BENCH.project,
    projectUuid: PROJECT_UUID,
    vmid,
    params: {
      kind: 'resize',
      target: { cores: 4 },
      steps: [{ cores: 4 }],
      before: { vmid, ha: false, cores: 2 },
      confirmedStopped: false,
    },
    requester: BENCH.requester,
    needsApproval: true,
    approvers: [BENCH.approver],
    expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
    notes: [],
  };
}

async function post(body: string, json: boolean): Promise<void> {
  const signed = sign(BENCH.signingSecret, body);
  const headers = json ? { ...signed.headers, 'content-type': 'application/json' } : signed.headers;
  const response = await request(events, { method: 'POST', headers, body });
  await response.body.dump();
  if (response.statusCode !== 200) throw new Error(`HTTP ${response.statusCode}`);
}

function openHome(user: string): Promise<void> {
  return post(
    JSON.stringify({
      team_id: BENCH.teamId,
      api_app_id: 'A0CLOUDOPS',
      type: 'event_callback',
      event_id: `Ev${Math.random().toString(36).slice(2)}`,
      event_time: Math.floor(Date.now() / 1000),
      event: {
        type: 'app_home_opened',
        user,
        channel: 'D0BENCH',
        tab: 'home',
        event_ts: String(Date.now() / 1000),
      },
    }),
    true,
  );
}

function cancel(requestId: string): Promise<void> {
  const payload = {
    type: 'block_actions',
    user: { id: BENCH.requester, team_id: BENCH.teamId },
    team: { id: BENCH.teamId },
    channel: { id: BENCH.channel },
    container: { type: 'message', channel_id: BENCH.channel, message_ts: '1.0' },
    trigger_id: slack.triggerId(),
    actions: [{ action_id: 'cancel', block_id: `request:${requestId}`, type: 'button', value: requestId }],
  };
  return post(new URLSearchParams({ payload: JSON.stringify(payload) }).toString(), false);
}

/** Resolves with the time the next publish for `user` after `seen` publishes arrives. */
async function nextPublish(user: string, seen: number, timeoutMs = 20_000): Promise<number> {
  const end = performance.now() + timeoutMs;
  for (;;) {
    const found = slack.homes.slice(seen).find((p) => p.user === user);
    if (found) return performance.now();
    if (performance.now() > end) throw new Error(`no home published for ${user}`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

const results: Record<string, unknown> = { date: new Date().toISOString(), node: process.version };
try {
  // 1. Open → published, with 0, 30 and 300 requests waiting for the approver.
  const openMs: Record<string, unknown> = {};
  let made = 0;
  for (const waiting of [0, 30, 300]) {
    while (made < waiting) await store.create(pending(70_000 + made++), BENCH.requester);
    const series: number[] = [];
    let blocks = 0;
    for (let i = 0; i < OPENS; i++) {
      const seen = slack.homes.length;
      const started = performance.now();
      await openHome(BENCH.approver);
      series.push((await nextPublish(BENCH.approver, seen)) - started);
      blocks = (slack.homes.at(-1)?.view.blocks as unknown[] | undefined)?.length ?? 0;
    }
    openMs[`${waiting} waiting`] = { ...roundedSpread(series.slice(5)), blocks };
  }
  results.openToPublishMs = openMs;
  console.info('app_home_opened → views.publish (ms, first 5 left out)', openMs);

  // 2. A change → the concerned person's home published again (coalescing window 1 s included).
  const ids = (await store.listInvolving(BENCH.requester, 5000)).requests.map((r) => r.id);
  // Only people who opened their home get it refreshed: the requester opens theirs once.
  const opened = slack.homes.length;
  await openHome(BENCH.requester);
  await nextPublish(BENCH.requester, opened);
  const changeSeries: number[] = [];
  for (let i = 0; i < CHANGES; i++) {
    const seen = slack.homes.length;
    const started = performance.now();
    await cancel(ids[i] ?? '');
    changeSeries.push((await nextPublish(BENCH.requester, seen)) - started);
    // Past the window, so each change is measured alone.
    await new Promise((resolve) => setTimeout(resolve, 1200));
  }
  results.changeToRepublishMs = roundedSpread(changeSeries);
  console.info('cancel click → requester’s home published again (ms)', results.changeToRepublishMs);

  // 3. A burst: BURST cancels at once → how many publishes for the requester and for the approver.
  const before = { requester: 0, approver: 0 };
  for (const p of slack.homes) if (p.user === BENCH.requester) before.requester++;
  for (const p of slack.homes) if (p.user === BENCH.approver) before.approver++;
  await Promise.all(ids.slice(CHANGES, CHANGES + BURST).map((id) => cancel(id)));
  await new Promise((resolve) => setTimeout(resolve, 4000));
  const count = (user: string) => slack.homes.filter((p) => p.user === user).length;
  results.burst = {
    changes: BURST,
    publishesRequester: count(BENCH.requester) - before.requester,
    publishesApprover: count(BENCH.approver) - before.approver,
  };
  console.info('burst', results.burst);
  if (slack.problems.length > 0)
    throw new Error(`the stand-in refused calls: ${JSON.stringify(slack.problems)}`);
} finally {
  await bot.stop();
  await redis.quit();
  await Promise.all([sim.close(), slack.close()]);
  await redisServer.stop();
}
await writeFile(
  fileURLToPath(new URL('./home-results.json', import.meta.url)),
  `${JSON.stringify(results, null, 2)}\n`,
);
