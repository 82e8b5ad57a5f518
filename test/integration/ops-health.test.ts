import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisAnswers, startLocalRedis } from '../../sim/local-redis.ts';
import { type OpsBot, startOpsBot } from '../helpers/ops-bot.ts';
import { testRedisUrl } from '../helpers/redis.ts';

async function get(url: string): Promise<{ status: number; type: string; text: string }> {
  const response = await request(url);
  return {
    status: response.statusCode,
    type: String(response.headers['content-type']),
    text: await response.body.text(),
  };
}

/** Polls until `check` holds, for states that settle asynchronously (a Redis client reconnecting). */
async function eventually(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const FAMILIES = [
  'cloudops_commands_total',
  'cloudops_requests_total',
  'cloudops_approvals_total',
  'cloudops_jobs_total',
  'cloudops_cloud_api_seconds',
  'cloudops_queue_depth',
  'cloudops_slack_api_errors_total',
];

describe('health and metrics of the running bot (HTTP mode, ROLE=all)', () => {
  let ops: OpsBot;
  beforeAll(async () => {
    ops = await startOpsBot({ redisUrl: testRedisUrl() });
  });
  afterAll(async () => {
    await ops.close();
  });

  it('/healthz and /readyz answer 200 next to POST /slack/events', async () => {
    const health = await get(`${ops.url}/healthz`);
    expect(health.status).toBe(200);
    expect(JSON.parse(health.text)).toEqual({ status: 'ok' });
    const ready = await get(`${ops.url}/readyz`);
    expect(ready.status).toBe(200);
    // The cloud API's check runs beside the start-up: it may not have answered yet (test/integration/startup-cloud-check).
    expect(JSON.parse(ready.text)).toEqual({
      status: 'ready',
      redis: true,
      policy: true,
      policyVersion: expect.stringMatching(/^[0-9a-f]{12}$/),
      cloud: expect.any(Boolean),
    });
    // The same port still refuses unsigned Slack traffic.
    expect((await ops.send('command=/cloud&text=help', { unsigned: true })).status).toBe(401);
  });

  it('/metrics is Prometheus text with every cloudops_* family, and counts what happened', async () => {
    const answer = await ops.command('clusters');
    expect(answer.status).toBe(200);
    // /cloud clusters reads the list endpoint: wait for the client's call to be recorded.
    await eventually(async () =>
      /cloudops_cloud_api_seconds_count\{operation="listClusters"/.test(
        (await get(`${ops.metricsUrl}/metrics`)).text,
      ),
    );
    const metrics = await get(`${ops.metricsUrl}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.type).toMatch(/^text\/plain; version=0\.0\.4/);
    for (const family of FAMILIES) expect(metrics.text).toMatch(new RegExp(`^# TYPE ${family} `, 'm'));
    expect(metrics.text).toMatch(/^cloudops_commands_total\{word="clusters"\} 1$/m);
    expect(metrics.text).toMatch(
      /^cloudops_cloud_api_seconds_count\{operation="listClusters",status="200",outcome="[a-z_]+"\} 1$/m,
    );
    // Queue depth is read at scrape time.
    expect(metrics.text).toMatch(/^cloudops_queue_depth\{queue="execute"\} \d+$/m);
    // Node's process metrics come along.
    expect(metrics.text).toMatch(/^process_cpu_user_seconds_total /m);
    for (const secret of Object.values(ops.secrets)) expect(metrics.text).not.toContain(secret);
  });
});

describe('/metrics: its own port on loopback, labels from closed sets (issue 17.1)', () => {
  let ops: OpsBot;
  beforeAll(async () => {
    ops = await startOpsBot({ redisUrl: testRedisUrl() });
  });
  afterAll(async () => {
    await ops.close();
  });

  /** The bot's own series (label sets, no values) on /metrics, and the size of the whole body. */
  async function scrape(): Promise<{ series: string[]; bytes: number }> {
    const { status, text } = await get(`${ops.metricsUrl}/metrics`);
    expect(status).toBe(200);
    const series = text
      .split('\n')
      .filter((l) => l.startsWith('cloudops_'))
      .map((l) => l.replace(/ [^ ]+$/, ''));
    return { series, bytes: text.length };
  }

  it('is not on the public port, and METRICS_HOST (default 127.0.0.1) is the only address it answers on', async () => {
    expect(ops.metricsUrl).not.toBe(ops.url);
    expect((await get(`${ops.url}/metrics`)).status).toBe(404);
    // HOST is 0.0.0.0: health answers on any loopback address; /metrics is bound to 127.0.0.1 alone.
    const port = new URL(ops.url).port;
    expect((await get(`http://127.0.0.2:${port}/healthz`)).status).toBe(200);
    const metricsPort = new URL(ops.metricsUrl).port;
    await expect(get(`http://127.0.0.2:${metricsPort}/metrics`)).rejects.toMatchObject({
      code: 'ECONNREFUSED',
    });
  });

  it('300 junk commands keep the number of series constant; a token typed after /cloud never appears', async () => {
    // Values no process metric could produce, so a hit can only come from what was typed.
    const token = `xoxp-${randomBytes(12).toString('hex')}`;
    const junk = (i: number) => `${i % 3 === 0 ? token : `zz${randomBytes(6).toString('hex')}`} arg${i}`;
    // Warm up: the first commands create the lazily built series that do not depend on what is typed.
    expect((await ops.command('nonsense')).status).toBe(200);
    const before = await scrape();
    const statuses: number[] = [];
    for (let i = 0; i < 300; i += 1) statuses.push((await ops.command(junk(i))).status);
    expect(statuses.every((s) => s === 200)).toBe(true);
    const after = await scrape();
    expect(after.series).toEqual(before.series);
    const text = (await get(`${ops.metricsUrl}/metrics`)).text;
    expect(text).not.toContain(token);
    expect(text).not.toMatch(/zz[0-9a-f]{12}/);
    expect(text).toMatch(/^cloudops_commands_total\{word="other"\} 301$/m);
    console.log(
      `300 junk commands: ${before.series.length} -> ${after.series.length} cloudops series, /metrics ${before.bytes} -> ${after.bytes} bytes`,
    );
  });
});

describe('readiness follows Redis', () => {
  it('/readyz is 503 while Redis is down (healthz stays 200), and 200 again when it is back', async () => {
    const redis = await startLocalRedis();
    const ops = await startOpsBot({ redisUrl: redis.url, role: 'web' });
    try {
      expect((await get(`${ops.url}/readyz`)).status).toBe(200);
      await redis.kill();
      expect(await redisAnswers(redis.url)).toBe(false);
      const down = await get(`${ops.url}/readyz`);
      expect(down.status).toBe(503);
      expect(JSON.parse(down.text)).toEqual({
        status: 'not ready',
        redis: false,
        policy: true,
        policyVersion: expect.stringMatching(/^[0-9a-f]{12}$/),
        cloud: expect.any(Boolean),
      });
      // It answers (within the ping timeout), never hangs: a hanging answer would end the test at its time-out.
      expect((await get(`${ops.url}/healthz`)).status).toBe(200);

      await redis.restart();
      await eventually(async () => (await get(`${ops.url}/readyz`)).status === 200);
    } finally {
      await ops.close();
      await redis.stop();
    }
  });
});

describe('an unknown path (HTTP mode, LOG_LEVEL=info)', () => {
  it('a request to an unknown path: 404, and one log line with the path as typed, secrets scrubbed', async () => {
    const ops = await startOpsBot({ redisUrl: testRedisUrl(), logLevel: 'info' });
    try {
      const before = ops.logs.length;
      const typed = `/slack/event/${ops.secrets.botToken}?next=1`;
      expect((await request(`${ops.url}${typed}`, { method: 'POST', body: '{}' })).statusCode).toBe(404);
      const lines = ops.logs.slice(before).filter((line) => line.includes('/slack/event/'));
      expect(lines, ops.logs.slice(before).join('\n')).toHaveLength(1);
      const entry = JSON.parse(lines[0] ?? '{}') as { level: string; path?: string; method?: string };
      expect(entry).toMatchObject({ level: 'info', method: 'POST', path: '/slack/event/[redacted]?next=1' });
      expect(lines[0]).not.toContain(ops.secrets.botToken);

      // A credential in the query (a scraper or webhook set up with ?token= or ?api_key= on the wrong path).
      const query = '/metrics/scrape?api_key=query-key-51c2&token=query-token-0f3e&page=2';
      expect((await request(`${ops.url}${query}`, { method: 'GET' })).statusCode).toBe(404);
      const scrape = ops.logs.filter((line) => line.includes('/metrics/scrape'));
      expect(scrape, ops.logs.slice(before).join('\n')).toHaveLength(1);
      expect(JSON.parse(scrape[0] ?? '{}')).toMatchObject({
        path: '/metrics/scrape?api_key=[redacted]&token=[redacted]&page=2',
      });
    } finally {
      await ops.close();
    }
  });
});

describe('health without Bolt (ROLE=worker)', () => {
  it('serves /healthz and /readyz on PORT, /metrics on METRICS_PORT, and nothing for Slack', async () => {
    const ops = await startOpsBot({ redisUrl: testRedisUrl(), role: 'worker' });
    try {
      expect((await get(`${ops.url}/healthz`)).status).toBe(200);
      expect((await get(`${ops.url}/readyz`)).status).toBe(200);
      expect((await get(`${ops.url}/metrics`)).status).toBe(404);
      const metrics = await get(`${ops.metricsUrl}/metrics`);
      for (const family of FAMILIES) expect(metrics.text).toMatch(new RegExp(`^# TYPE ${family} `, 'm'));
      expect((await ops.command('help')).status).toBe(404);
    } finally {
      await ops.close();
    }
  });
});
