import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type CloudSim, startCloudSim } from '../../sim/cloud/server.ts';
import { freePort } from '../../sim/local-redis.ts';
import { type SlackStandIn, startSlackStandIn } from '../../sim/slack/server.ts';
import { loadEnv } from '../../src/config/env.ts';
import { parsePolicy } from '../../src/config/policy.ts';
import { startCloudops } from '../../src/main.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { type BotProcess, spawnBot } from '../helpers/bot-process.ts';
import { deleteKeys, testRedis, testRedisUrl, uniquePrefix } from '../helpers/redis.ts';
import { TEST_SEAL_KEY } from '../helpers/seal.ts';

// The cloud API checked at start-up without holding it: one warning line, /readyz 200 with "cloud": false, and
// cloudops_cloud_api_up 0 until a later check passes (docs/troubleshooting.md#cloud-api).
const BOT_TOKEN = 'xoxb-0000-0000-cloudcheck';
const API_KEY = 'cloud-check-key-61d0a2';
const WARNING = 'cloud API check failed';

let dir: string;
let policyFile: string;
let redis: Redis;
let slack: SlackStandIn;
let sim: CloudSim;
let bot: BotProcess | undefined;
const prefixes: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cloudops-cloud-check-'));
  policyFile = join(dir, 'policy.yml');
  await writeFile(policyFile, 'approvers: [U0ADMIN]\n');
  redis = testRedis();
  [slack, sim] = await Promise.all([
    startSlackStandIn({ botToken: BOT_TOKEN }),
    startCloudSim({ apiKey: API_KEY }),
  ]);
});
afterEach(async () => {
  bot?.kill('SIGKILL');
  await bot?.exited;
  bot = undefined;
});
afterAll(async () => {
  for (const prefix of prefixes) await deleteKeys(redis, prefix);
  await redis.quit();
  await Promise.all([slack?.close(), sim?.close()]);
  await rm(dir, { recursive: true, force: true });
});

function startBot(cloud: Record<string, string>): BotProcess {
  const prefix = uniquePrefix('cloudcheck');
  prefixes.push(prefix);
  bot = spawnBot(
    {
      SLACK_BOT_TOKEN: BOT_TOKEN,
      SLACK_SIGNING_SECRET: 'cloud-check-signing-secret',
      SLACK_API_URL: slack.apiUrl,
      SEAL_KEY: TEST_SEAL_KEY,
      POLICY_FILE: policyFile,
      REDIS_URL: testRedisUrl(),
      REDIS_PREFIX: prefix,
      PORT: '0',
      ...cloud,
    },
    dir,
  );
  return bot;
}

/** The bot's JSON log lines whose msg contains `text`. */
const logLines = (process: BotProcess, text: string) =>
  process
    .stdout()
    .split('\n')
    .filter((line) => line.includes(text));

async function until<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  ms = 20_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** /readyz's status and body, and /metrics' cloudops_cloud_api_up. */
async function health(port: number, metricsPort: number) {
  const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
  const body = (await ready.json()) as { status: string; cloud?: boolean };
  const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const gauge = /^cloudops_cloud_api_up (\d)$/m.exec(metrics)?.[1];
  return { status: ready.status, body, gauge };
}

function metricsPortOf(process: BotProcess): number {
  const line = logLines(process, '"msg":"cloudops ready"')[0] ?? '{}';
  return (JSON.parse(line) as { metricsPort: number }).metricsPort;
}

describe('the cloud API check at start-up', { timeout: 120_000 }, () => {
  it('nothing at CLOUD_API_URL: the bot starts, one warning line, /readyz 200 with "cloud": false, the gauge 0', async () => {
    const port = await freePort();
    const process = startBot({ CLOUD_API_URL: `http://127.0.0.1:${port}`, CLOUD_API_KEY: API_KEY });
    const httpPort = await process.ready();
    const warning = await until('the warning', () => logLines(process, WARNING)[0]);
    const entry = JSON.parse(warning) as { level: unknown; why: string };
    expect(entry.why).toMatch(/could not be reached \(ECONNREFUSED\)/);
    const found = await health(httpPort, metricsPortOf(process));
    expect(found).toMatchObject({ status: 200, body: { status: 'ready', cloud: false }, gauge: '0' });
    expect(logLines(process, WARNING)).toHaveLength(1);
  });

  it('a key the API refuses: the warning names the refusal, never the key; /readyz 200 with "cloud": false', async () => {
    const process = startBot({ CLOUD_API_URL: sim.url, CLOUD_API_KEY: 'refused-key-0f9e8d7c' });
    const httpPort = await process.ready();
    const warning = await until('the warning', () => logLines(process, WARNING)[0]);
    expect(warning).toContain('the API refused the key (HTTP 403)');
    expect(process.stdout()).not.toContain('refused-key-0f9e8d7c');
    const found = await health(httpPort, metricsPortOf(process));
    expect(found).toMatchObject({ status: 200, body: { cloud: false }, gauge: '0' });
  });

  it('the right URL and key: "cloud": true, the gauge 1, no warning', async () => {
    const process = startBot({ CLOUD_API_URL: sim.url, CLOUD_API_KEY: API_KEY });
    const httpPort = await process.ready();
    const metricsPort = metricsPortOf(process);
    const found = await until('cloud up', async () => {
      const h = await health(httpPort, metricsPort);
      return h.body.cloud === true ? h : undefined;
    });
    expect(found).toMatchObject({ status: 200, gauge: '1' });
    expect(logLines(process, WARNING)).toEqual([]);
  });
});

describe('the cloud API coming back', () => {
  it('a later check that passes sets "cloud": true and the gauge 1, with one line saying so', async () => {
    const port = await freePort();
    const prefix = uniquePrefix('cloudcheck');
    prefixes.push(prefix);
    const logs: string[] = [];
    const logger = createLogger({ level: 'info' }, { write: (line: string) => void logs.push(line) });
    const env = loadEnv({
      SLACK_BOT_TOKEN: BOT_TOKEN,
      SLACK_SIGNING_SECRET: 'cloud-check-signing-secret',
      SLACK_API_URL: slack.apiUrl,
      CLOUD_API_URL: `http://127.0.0.1:${port}`,
      CLOUD_API_KEY: API_KEY,
      SEAL_KEY: TEST_SEAL_KEY,
      REDIS_URL: testRedisUrl(),
      REDIS_PREFIX: prefix,
      PORT: '0',
      METRICS_PORT: '0',
    });
    const running = await startCloudops(env, parsePolicy('approvers: [U0ADMIN]\n'), {
      logger,
      shutdownTimeoutMs: 5_000,
      cloudCheck: { downEveryMs: 200, upEveryMs: 60_000 },
    });
    let late: CloudSim | undefined;
    try {
      await until('the warning', () => logs.find((line) => line.includes(WARNING)));
      expect((await health(running.port!, running.metricsPort)).body.cloud).toBe(false);
      // Still down over several checks: still the one line.
      await new Promise((r) => setTimeout(r, 1_000));
      expect(logs.filter((line) => line.includes(WARNING))).toHaveLength(1);

      late = await startCloudSim({ apiKey: API_KEY, port });
      const back = await until('cloud up', async () => {
        const h = await health(running.port!, running.metricsPort);
        return h.body.cloud === true ? h : undefined;
      });
      expect(back).toMatchObject({ status: 200, gauge: '1' });
      const again = logs.filter((line) => line.includes('cloud API reachable again'));
      expect(again).toHaveLength(1);
      expect((JSON.parse(again[0]!) as { failedChecks: number }).failedChecks).toBeGreaterThanOrEqual(2);
    } finally {
      await running.stop();
      await late?.close();
    }
  });
});
