/**
 * Socket Mode's numbers: how long a command's ack takes over the socket (against signed HTTP to the same bot code),
 * how long the link is down after Slack's `disconnect` and after a dropped socket (production reconnect policy), and,
 * with the compiled bot in its own process, how fast SIGTERM ends a start-up that is still connecting and how soon a
 * start-up whose link never comes up exits 1. A Redis of its own, the simulators in this process; medians with
 * min–max. Writes bench/socket-mode-results.json.
 *
 *   node --import tsx bench/socket-mode.ts [--acks 300] [--reconnects 10] [--children 5]
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { startCloudSim } from '../sim/cloud/server.ts';
import { freePort, startLocalRedis } from '../sim/local-redis.ts';
import { type SlackStandIn, startSlackStandIn } from '../sim/slack/server.ts';
import { loadEnv } from '../src/config/env.ts';
import { parsePolicy } from '../src/config/policy.ts';
import { type Running, startCloudops } from '../src/main.ts';
import { createLogger } from '../src/observability/logger.ts';
import { benchEnv } from './lib/bot.ts';
import { BENCH } from './lib/identity.ts';
import { sign } from './lib/slack-request.ts';
import { roundedSpread } from './lib/stats.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const { values } = parseArgs({
  options: {
    acks: { type: 'string', default: '300' },
    reconnects: { type: 'string', default: '10' },
    children: { type: 'string', default: '5' },
  },
});
const ACKS = Number(values.acks);
const RECONNECTS = Number(values.reconnects);
const CHILDREN = Number(values.children);

const TEAM = BENCH.teamId;
const CHANNEL = BENCH.channel;
const POLICY = `workspace: ${TEAM}\napprovers: [${BENCH.approver}]\n`;
const botToken = BENCH.botToken;
const appToken = `xapp-1-bench-${randomBytes(6).toString('hex')}`;
const signingSecret = BENCH.signingSecret;

function commandFields(slack: SlackStandIn): Record<string, string> {
  return {
    team_id: TEAM,
    channel_id: CHANNEL,
    user_id: 'U0BENCH',
    command: '/cloud',
    text: 'help',
    api_app_id: 'A0CLOUDOPS',
    trigger_id: slack.triggerId(),
    response_url: slack.responseUrl({ channel: CHANNEL }),
  };
}

async function until(
  what: string,
  done: () => Promise<boolean> | boolean,
  timeoutMs = 60_000,
): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (!(await done())) {
    if (performance.now() > end) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

execFileSync(process.execPath, ['scripts/build.mjs', '--if-stale'], { cwd: ROOT, stdio: 'inherit' });
const redis = await startLocalRedis();
const sim = await startCloudSim();
const dir = await mkdtemp(join(tmpdir(), 'cloudops-bench-socket-'));
const logs: string[] = [];
const logger = createLogger(
  { level: 'warn', secrets: [botToken, appToken, signingSecret] },
  { write: (line: string) => void logs.push(line) },
);

/** Where the simulators answer, as the bench's environment builder takes it. */
const simsOf = (slack: SlackStandIn) => ({
  slackApiUrl: slack.apiUrl,
  cloudUrl: sim.url,
  cloudApiKey: sim.apiKey,
  projectUuid: '',
});

/** The whole web role in this process, in one mode, against a fresh stand-in. */
async function startBot(mode: 'socket' | 'http'): Promise<{ bot: Running; slack: SlackStandIn }> {
  const slack = await startSlackStandIn({ botToken, appToken, teamId: TEAM });
  const env = loadEnv({
    ...benchEnv(simsOf(slack), {
      redisUrl: redis.url,
      prefix: `bench-socket-${mode}`,
      role: 'web',
      logLevel: 'warn',
    }),
    SLACK_APP_TOKEN: mode === 'socket' ? appToken : undefined,
  });
  const bot = await startCloudops(env, parsePolicy(POLICY, 'bench-policy.yml'), { logger });
  return { bot, slack };
}

const results: Record<string, unknown> = { date: new Date().toISOString(), node: process.version };
try {
  // 1. Ack latency of `/cloud help` (answered in the ack), one at a time: socket envelope → ack, and signed HTTP.
  const socket = await startBot('socket');
  const overSocket: number[] = [];
  for (let i = 0; i < ACKS; i++) {
    const ack = await socket.slack.socket.deliver('slash_commands', commandFields(socket.slack));
    if (ack.payload?.response_type !== 'ephemeral') throw new Error('help was not answered in the ack');
    overSocket.push(ack.ms);
  }
  const http = await startBot('http');
  const overHttp: number[] = [];
  for (let i = 0; i < ACKS; i++) {
    const signed = sign(signingSecret, new URLSearchParams(commandFields(http.slack)).toString());
    const started = performance.now();
    const response = await request(`http://127.0.0.1:${http.bot.port}/slack/events`, {
      method: 'POST',
      headers: signed.headers,
      body: signed.body,
    });
    await response.body.text();
    if (response.statusCode !== 200) throw new Error(`HTTP ${response.statusCode}`);
    overHttp.push(performance.now() - started);
  }
  await http.bot.stop();
  await http.slack.close();
  results.ackMs = { socket: roundedSpread(overSocket.slice(20)), http: roundedSpread(overHttp.slice(20)) };
  console.info('ack latency (ms, first 20 left out as warm-up)', results.ackMs);

  // 2. The link down and up again, production policy: from Slack's `disconnect` (or the drop) until /readyz is 200.
  const readyz = async () => {
    const response = await request(`http://127.0.0.1:${socket.bot.port}/readyz`);
    await response.body.dump();
    return response.statusCode === 200;
  };
  const outage = async (cause: () => void, refused = 0): Promise<number> => {
    const opened = socket.slack.socket.connections;
    socket.slack.socket.refuseConnections(refused);
    const started = performance.now();
    cause();
    await until('the new link', () => socket.slack.socket.connections > opened);
    await until('/readyz 200', readyz);
    return performance.now() - started;
  };
  const reconnect: Record<string, number[]> = { refresh_requested: [], warning: [], dropped: [] };
  for (let i = 0; i < RECONNECTS; i++) {
    reconnect.refresh_requested?.push(
      await outage(() => socket.slack.socket.disconnect('refresh_requested')),
    );
    reconnect.warning?.push(await outage(() => socket.slack.socket.disconnect('warning')));
    reconnect.dropped?.push(await outage(() => socket.slack.socket.drop()));
  }
  const refusedTwice: number[] = [];
  for (let i = 0; i < Math.min(3, RECONNECTS); i++)
    refusedTwice.push(await outage(() => socket.slack.socket.drop(), 2));
  results.reconnectMs = {
    ...Object.fromEntries(Object.entries(reconnect).map(([k, v]) => [k, roundedSpread(v)])),
    droppedThenTwoRefusals: roundedSpread(refusedTwice),
  };
  console.info('link down → /readyz 200 again (ms)', results.reconnectMs);
  await socket.bot.stop();
  await socket.slack.close();

  // 3. The compiled bot in its own process: SIGTERM while the link connects, and a link that never comes up.
  const policyFile = join(dir, 'policy.yml');
  await writeFile(policyFile, POLICY);
  const slack = await startSlackStandIn({ botToken, appToken, teamId: TEAM });
  slack.socket.refuseConnections(Number.MAX_SAFE_INTEGER);
  const child = (port: number) =>
    spawn(process.execPath, [join(ROOT, 'dist/src/main.js')], {
      cwd: dir,
      env: {
        PATH: process.env.PATH ?? '',
        ...benchEnv(simsOf(slack), {
          redisUrl: redis.url,
          prefix: 'bench-socket-child',
          role: 'web',
          logLevel: 'warn',
          port,
          policyFile,
        }),
        SLACK_APP_TOKEN: appToken,
      },
      stdio: 'ignore',
    });
  const exitOf = (proc: ReturnType<typeof spawn>) =>
    new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const sigterm: number[] = [];
  for (let i = 0; i < CHILDREN; i++) {
    const asked = slack.callsOf('apps.connections.open').length;
    const proc = child(await freePort());
    const exited = exitOf(proc);
    await until('a connect attempt', () => slack.callsOf('apps.connections.open').length > asked);
    const sentAt = performance.now();
    proc.kill('SIGTERM');
    const code = await exited;
    if (code !== 0) throw new Error(`SIGTERM while connecting ended with ${code}`);
    sigterm.push(performance.now() - sentAt);
  }
  const failing: number[] = [];
  for (let i = 0; i < CHILDREN; i++) {
    const spawnedAt = performance.now();
    const code = await exitOf(child(await freePort()));
    if (code !== 1) throw new Error(`a start-up that cannot connect ended with ${code}`);
    failing.push(performance.now() - spawnedAt);
  }
  await slack.close();
  results.childMs = {
    sigtermWhileConnecting: roundedSpread(sigterm),
    failingStartupExit: roundedSpread(failing),
  };
  console.info('compiled bot in its own process (ms)', results.childMs);
  await writeFile(join(ROOT, 'bench/socket-mode-results.json'), `${JSON.stringify(results, null, 2)}\n`);
} finally {
  await sim.close();
  await redis.stop();
  await rm(dir, { recursive: true, force: true });
}
