import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CloudSim, startCloudSim } from '../../sim/cloud/server.ts';
import { type SlackStandIn, startSlackStandIn } from '../../sim/slack/server.ts';
import { spawnBot } from '../helpers/bot-process.ts';
import { OPS, OPS_POLICY } from '../helpers/ops-bot.ts';
import { deleteKeys, testRedisUrl, uniquePrefix } from '../helpers/redis.ts';
import { TEST_SEAL_KEY } from '../helpers/seal.ts';

// Each role loads only what it runs: the compiled bot as `npm start` runs it, one process per role, with a
// preloaded module that writes, when the process exits, every module it loaded: ES modules and CommonJS alike, through
// the module hooks, and the CommonJS cache besides (Bolt and its Socket Mode client are CommonJS packages).
const RECORDER = `
import { writeFileSync } from 'node:fs';
import { Module, registerHooks } from 'node:module';
const loaded = new Set();
registerHooks({
  load(url, context, nextLoad) {
    loaded.add(url);
    return nextLoad(url, context);
  },
});
process.on('exit', () =>
  writeFileSync(process.env.LOADED_OUT, [...loaded, ...Object.keys(Module._cache)].join('\\n')),
);
`;

const BOT_TOKEN = 'xoxb-0000-0000-roleloading';
const API_KEY = 'role-loading-api-key';
let dir: string;
let sim: CloudSim;
let slack: SlackStandIn;
const prefixes: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cloudops-roles-'));
  await writeFile(join(dir, 'recorder.mjs'), RECORDER);
  await writeFile(join(dir, 'policy.yml'), OPS_POLICY);
  sim = await startCloudSim({ apiKey: API_KEY });
  slack = await startSlackStandIn({ botToken: BOT_TOKEN, teamId: OPS.team });
});
afterAll(async () => {
  const redis = new Redis(testRedisUrl());
  for (const prefix of prefixes) await deleteKeys(redis, prefix);
  redis.disconnect();
  await Promise.all([sim?.close(), slack?.close()]);
  await rm(dir, { recursive: true, force: true });
});

/** The packages a bot process running `role` (with `env` besides) had loaded when it stopped. */
async function packagesLoaded(role: string, env: Record<string, string> = {}): Promise<Set<string>> {
  const prefix = uniquePrefix(`roles-${role}`);
  prefixes.push(prefix);
  const out = join(dir, `${prefix.replace(/[^\w-]/g, '_')}.loaded`);
  const bot = spawnBot(
    {
      NODE_OPTIONS: `--import ${join(dir, 'recorder.mjs')}`,
      LOADED_OUT: out,
      SLACK_BOT_TOKEN: BOT_TOKEN,
      SLACK_SIGNING_SECRET: 'role-loading-signing-secret',
      SLACK_API_URL: slack.apiUrl,
      CLOUD_API_URL: sim.url,
      CLOUD_API_KEY: API_KEY,
      SEAL_KEY: TEST_SEAL_KEY,
      REDIS_URL: testRedisUrl(),
      REDIS_PREFIX: prefix,
      PORT: '0',
      ROLE: role,
      LOG_LEVEL: 'info',
      POLICY_FILE: join(dir, 'policy.yml'),
      ...env,
    },
    dir,
  );
  await bot.ready();
  bot.kill('SIGTERM');
  expect((await bot.ends()).code).toBe(0);
  const paths = (await readFile(out, 'utf8')).split('\n');
  return new Set(
    paths.map((p) => /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(p)?.[1]).filter((p) => p !== undefined),
  );
}

describe('start-up loads only what the role runs', () => {
  it('a worker and a scheduler load neither Bolt nor its Socket Mode client; the web role does', async () => {
    const [web, worker, scheduler] = await Promise.all([
      packagesLoaded('web'),
      packagesLoaded('worker'),
      packagesLoaded('scheduler'),
    ]);
    expect(web.has('@slack/bolt')).toBe(true);
    for (const alone of [worker, scheduler]) {
      expect(alone.has('@slack/bolt')).toBe(false);
      expect(alone.has('@slack/socket-mode')).toBe(false);
    }
  });

  it('the MCP SDK loads only when MCP_PORT is set', async () => {
    const [all, web, withMcp] = await Promise.all([
      packagesLoaded('all'),
      packagesLoaded('web'),
      packagesLoaded('web', { MCP_PORT: '0' }),
    ]);
    for (const without of [all, web]) {
      expect(without.has('@slack/bolt')).toBe(true);
      expect(without.has('@modelcontextprotocol/sdk')).toBe(false);
    }
    expect(withMcp.has('@modelcontextprotocol/sdk')).toBe(true);
  });
});
