import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CloudSim, startCloudSim } from '../../sim/cloud/server.ts';
import { type LocalRedis, startLocalRedis } from '../../sim/local-redis.ts';
import { type SlackStandIn, startSlackStandIn } from '../../sim/slack/server.ts';
import { type BotProcess, spawnBot } from '../helpers/bot-process.ts';
import { TEST_SEAL_KEY } from '../helpers/seal.ts';

// Logs stay readable during an outage (docs/troubleshooting.md#logs): a Redis of this file's own is killed under a
// running bot for about 10 s; the bot writes one line when the connection goes and one when it is back (with a count
// of what failed between), at most 30 lines in all, every level a word.
const BOT_TOKEN = 'xoxb-0000-0000-outagelogs';
const API_KEY = 'outage-logs-key-4e1b';
const OUTAGE_MS = 10_000;
const MAX_LINES = 30;

let dir: string;
let redis: LocalRedis;
let slack: SlackStandIn;
let sim: CloudSim;
let bot: BotProcess | undefined;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cloudops-outage-'));
  await writeFile(join(dir, 'policy.yml'), 'approvers: [U0ADMIN]\n');
  [redis, slack, sim] = await Promise.all([
    startLocalRedis(),
    startSlackStandIn({ botToken: BOT_TOKEN }),
    startCloudSim({ apiKey: API_KEY }),
  ]);
});
afterAll(async () => {
  bot?.kill('SIGKILL');
  await bot?.exited;
  await Promise.all([redis?.stop(), slack?.close(), sim?.close()]);
  await rm(dir, { recursive: true, force: true });
});

const lines = (text: string) => text.split('\n').filter((line) => line.trim() !== '');

describe('a 10 s Redis outage under a running bot', { timeout: 120_000 }, () => {
  it(`writes at most ${MAX_LINES} lines: one when Redis goes, one when it is back with a count`, async () => {
    bot = spawnBot(
      {
        SLACK_BOT_TOKEN: BOT_TOKEN,
        SLACK_SIGNING_SECRET: 'outage-logs-signing-secret',
        SLACK_API_URL: slack.apiUrl,
        CLOUD_API_URL: sim.url,
        CLOUD_API_KEY: API_KEY,
        SEAL_KEY: TEST_SEAL_KEY,
        POLICY_FILE: join(dir, 'policy.yml'),
        REDIS_URL: redis.url,
        // The bot listens where the OS puts it and says where in its ready line.
        PORT: '0',
      },
      dir,
    );
    const port = await bot.ready();
    // Let the start-up's own lines (and the cloud check) settle before counting.
    await new Promise((r) => setTimeout(r, 1_500));
    const before = { out: lines(bot.stdout()).length, err: bot.stderrLines().length };

    await redis.kill();
    await new Promise((r) => setTimeout(r, OUTAGE_MS));
    await redis.restart();
    // Back: /readyz answers 200 again, and the reconnect lines had time to come.
    const deadline = Date.now() + 60_000;
    for (;;) {
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`).then(
        (r) => r.status,
        () => 0,
      );
      if (ready === 200) break;
      if (Date.now() > deadline) throw new Error('the bot did not become ready after Redis came back');
      await new Promise((r) => setTimeout(r, 200));
    }
    await new Promise((r) => setTimeout(r, 3_000));

    const written = [...lines(bot.stdout()).slice(before.out), ...bot.stderrLines().slice(before.err)];
    expect(written.length, written.join('\n')).toBeLessThanOrEqual(MAX_LINES);
    const entries = lines(bot.stdout())
      .slice(before.out)
      .map((line) => JSON.parse(line) as { level: unknown; msg: string; failed?: number });
    expect(entries.every((e) => typeof e.level === 'string')).toBe(true);
    const lost = entries.filter((e) => e.msg === 'redis connection lost');
    const back = entries.filter((e) => e.msg === 'redis connection back');
    expect(lost.length).toBeGreaterThanOrEqual(1);
    expect(back.length).toBe(lost.length);
    expect(lost[0]?.level).toBe('warn');
    expect(back.every((e) => typeof e.failed === 'number')).toBe(true);
    expect(bot.child.exitCode).toBe(null);
  });
});

describe('the Socket Mode link lost and refused three times', { timeout: 120_000 }, () => {
  it('is one line when it goes, one for the first failed attempt, one when it is back with the count', async () => {
    bot?.kill('SIGKILL');
    await bot?.exited;
    bot = spawnBot(
      {
        ROLE: 'web',
        SLACK_BOT_TOKEN: BOT_TOKEN,
        SLACK_APP_TOKEN: slack.socket.appToken,
        SLACK_API_URL: slack.apiUrl,
        CLOUD_API_URL: sim.url,
        CLOUD_API_KEY: API_KEY,
        SEAL_KEY: TEST_SEAL_KEY,
        POLICY_FILE: join(dir, 'policy.yml'),
        REDIS_URL: redis.url,
        PORT: '0',
      },
      dir,
    );
    await bot.ready();
    await new Promise((r) => setTimeout(r, 1_500));
    const before = { out: lines(bot.stdout()).length, err: bot.stderrLines().length };
    const connections = slack.socket.connections;
    slack.socket.refuseConnections(3);
    slack.socket.drop();
    // Three refused attempts (1 + 2 + 4 s apart), then the fourth connects.
    await slack.socket.waitForConnection(connections + 1, 30_000);
    await new Promise((r) => setTimeout(r, 1_000));

    const written = [...lines(bot.stdout()).slice(before.out), ...bot.stderrLines().slice(before.err)];
    const entries = written.map(
      (line) => JSON.parse(line) as { level: string; msg: string; failedAttempts?: number },
    );
    expect(
      entries.map((e) => `${e.level} ${e.msg}`),
      written.join('\n'),
    ).toEqual([
      'warn Socket Mode connection lost; reconnecting',
      'warn Socket Mode connection failed; retrying',
      'info Socket Mode connected',
    ]);
    expect(entries[2]?.failedAttempts).toBe(3);
  });
});
