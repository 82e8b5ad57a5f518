import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type SlackStandIn, startSlackStandIn } from '../../sim/slack/server.ts';
import { type BotProcess, spawnBot } from '../helpers/bot-process.ts';
import { deleteKeys, testRedis, testRedisUrl, uniquePrefix } from '../helpers/redis.ts';
import { TEST_SEAL_KEY } from '../helpers/seal.ts';
import { STARTUP_WAIT_MS } from '../helpers/startup.ts';

// Socket Mode as an operator runs it (the compiled bot in its own process, docs/operations.md#start-up): /healthz answers
// while the link connects, /readyz is 503 until it is up and after it is lost, SIGTERM works while connecting, and a
// start-up that cannot connect prints one line and exits 1. Slack is the stand-in in this process. How long these
// take is the benchmark's to report, not a test's to assert.
const BOT_TOKEN = 'xoxb-0000-0000-sockettest';
const APP_TOKEN = 'xapp-1-A0CLOUDOPS-0000-sockettest';

let dir: string;
let policyFile: string;
let redis: Redis;
let slack: SlackStandIn;
let bot: BotProcess | undefined;
const prefixes: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cloudops-socket-'));
  policyFile = join(dir, 'policy.yml');
  await writeFile(policyFile, 'approvers: [U0ADMIN]\n');
  redis = testRedis();
});
afterEach(async () => {
  bot?.kill('SIGKILL');
  await bot?.exited;
  bot = undefined;
  await slack?.close();
});
afterAll(async () => {
  for (const prefix of prefixes) await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(dir, { recursive: true, force: true });
});

/** The web role in Socket Mode against a fresh stand-in, listening where the OS puts it (see {@link healthPort}). */
function startBot(overrides: Record<string, string> = {}): void {
  const prefix = uniquePrefix('socket');
  prefixes.push(prefix);
  bot = spawnBot(
    {
      ROLE: 'web',
      SLACK_BOT_TOKEN: BOT_TOKEN,
      SLACK_APP_TOKEN: APP_TOKEN,
      SLACK_API_URL: slack.apiUrl,
      CLOUD_API_URL: 'http://127.0.0.1:9/',
      CLOUD_API_KEY: 'socket-test-api-key',
      SEAL_KEY: TEST_SEAL_KEY,
      POLICY_FILE: policyFile,
      REDIS_URL: testRedisUrl(),
      REDIS_PREFIX: prefix,
      PORT: '0',
      METRICS_PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'debug',
      ...overrides,
    },
    dir,
  );
}

/** The port health answers on before the bot is ready: from the health server's debug line. */
function healthPort(): Promise<number> {
  return until('the health server listening', async () => {
    const line = bot
      ?.stdout()
      .split('\n')
      .find((l) => l.includes('"msg":"health server listening"'));
    return line ? (JSON.parse(line) as { port: number }).port : undefined;
  });
}

async function get(port: number, path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** Polls `probe` until it returns a value, or fails after `timeoutMs`. */
async function until<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = STARTUP_WAIT_MS,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > end)
      throw new Error(`${what} not within ${timeoutMs} ms: ${bot?.stderrLines().join('\n')}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('Socket Mode start-up and shutdown', { timeout: STARTUP_WAIT_MS + 60_000 }, () => {
  it('/healthz answers while the link connects, /readyz 503 until it is up and again while it is lost', async () => {
    slack = await startSlackStandIn({ botToken: BOT_TOKEN, appToken: APP_TOKEN });
    // The first two upgrades fail: the link retries after 1 s, then 2 s.
    slack.socket.refuseConnections(2);
    startBot();
    const port = await healthPort();
    const health = await until('/healthz', async () => {
      const r = await get(port, '/healthz');
      return r.status === 200 ? r : undefined;
    });
    expect(health.body).toEqual({ status: 'ok' });
    const connecting = await get(port, '/readyz');
    expect(connecting).toEqual({
      status: 503,
      // Nothing answers at CLOUD_API_URL: reported, never a reason for 503.
      body: {
        status: 'not ready',
        redis: true,
        policy: true,
        policyVersion: expect.stringMatching(/^[0-9a-f]{12}$/),
        slack: false,
        cloud: false,
      },
    });
    expect(await bot?.ready()).toBe(port);
    expect(await get(port, '/readyz')).toEqual({
      status: 200,
      body: {
        status: 'ready',
        redis: true,
        policy: true,
        policyVersion: expect.stringMatching(/^[0-9a-f]{12}$/),
        slack: true,
        cloud: false,
      },
    });
    expect(slack.callsOf('apps.connections.open').length).toBe(3);

    // Lost: the next attempt at once is refused, so the link is down for about a second.
    slack.socket.refuseConnections(1);
    slack.socket.drop();
    const lost = await until('/readyz 503', async () => {
      const r = await get(port, '/readyz');
      return r.status === 503 ? r : undefined;
    });
    expect(lost.body.slack).toBe(false);
    await until('/readyz 200', async () => {
      const r = await get(port, '/readyz');
      return r.status === 200 ? r : undefined;
    });
    expect(slack.socket.connections).toBe(2);
    const answered = await slack.socket.deliver('slash_commands', {
      command: '/cloud',
      text: 'help',
      team_id: 'T0TEST',
      channel_id: 'C0PROD',
      user_id: 'U0DEV',
      trigger_id: 'trigger-socket-test',
      response_url: slack.responseUrl({ channel: 'C0PROD' }),
    });
    expect(answered.payload?.response_type).toBe('ephemeral');

    bot?.kill('SIGTERM');
    const exit = await bot?.ends();
    expect(exit?.code).toBe(0);
    await slack.socket.waitForNoConnection(STARTUP_WAIT_MS);
    const output = bot?.stdout() ?? '';
    expect(output).not.toContain(APP_TOKEN);
    expect(output).not.toMatch(/ticket=(?!\[redacted\])/);
  });

  it('SIGTERM while the link connects: exit 0 at once', async () => {
    slack = await startSlackStandIn({ botToken: BOT_TOKEN, appToken: APP_TOKEN });
    slack.socket.refuseConnections(Number.MAX_SAFE_INTEGER);
    startBot();
    const port = await healthPort();
    await until('/healthz', async () => ((await get(port, '/healthz')).status === 200 ? true : undefined));
    await until('an attempt to connect', async () =>
      slack.callsOf('apps.connections.open').length ? true : undefined,
    );
    bot?.kill('SIGTERM');
    const exit = await bot?.ends();
    expect(exit?.code).toBe(0);
    expect(bot?.stderrLines()).toEqual([]);
    expect(bot?.stdout()).toContain('"signal":"SIGTERM","msg":"SIGTERM received while starting, stopping"');
  });

  it('a link that never comes up: one line naming it, exit 1 when the start-up deadline passes', async () => {
    slack = await startSlackStandIn({ botToken: BOT_TOKEN, appToken: APP_TOKEN });
    slack.socket.refuseConnections(Number.MAX_SAFE_INTEGER);
    startBot({ STARTUP_TIMEOUT_SECONDS: '10' });
    const exit = await bot?.ends();
    expect(exit?.code).toBe(1);
    expect(bot?.stderrLines()).toEqual([
      'cloudops: could not start: still waiting for the Socket Mode connection to Slack (apps.connections.open at SLACK_API_URL) when the start-up deadline passed',
    ]);
  });

  it('an app-level token Slack refuses: one line naming SLACK_APP_TOKEN, exit 1 at once', async () => {
    slack = await startSlackStandIn({ botToken: BOT_TOKEN, appToken: 'xapp-1-A0CLOUDOPS-the-real-one' });
    startBot();
    const exit = await bot?.ends();
    expect(exit?.code).toBe(1);
    expect(bot?.stderrLines()).toEqual([
      'cloudops: could not start: SLACK_APP_TOKEN: Slack refused the app-level token (invalid_auth)',
    ]);
    expect(slack.socket.connections).toBe(0);
  });

  it('a bot token given as the app-level token is refused at once by the environment check', async () => {
    slack = await startSlackStandIn({ botToken: BOT_TOKEN, appToken: APP_TOKEN });
    startBot({ SLACK_APP_TOKEN: BOT_TOKEN });
    const exit = await bot?.ends();
    expect(exit?.code).toBe(1);
    expect(bot?.stderrLines()).toEqual([
      'cloudops: SLACK_APP_TOKEN: expected an app-level token starting with xapp-',
    ]);
  });
});
