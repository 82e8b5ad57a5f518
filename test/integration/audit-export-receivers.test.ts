import { createHmac } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import { Agent } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type AuditShipper, startAuditShipper } from '../../src/audit-export/shipper.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createMetrics, type Metrics } from '../../src/observability/metrics.ts';
import { AUDIT_EXPORT_GROUP } from '../../src/requests/audit/audit.ts';
import { requestKeys } from '../../src/requests/store/keys.ts';
import { RequestStore } from '../../src/requests/store/store.ts';
import { resizeRequest } from '../fixtures/requests.ts';
import { deleteKeys, testRedis, uniquePrefix } from '../helpers/redis.ts';

// The audit export against receivers that misbehave or are configured the way operators write them: real HTTP
// servers on loopback, the shipper on real Redis, its log captured.

/** A receiver whose `handle` answers each POST; `seen` has each request's method, path and headers. */
interface TestReceiver {
  url: string;
  seen: { path: string; headers: IncomingMessage['headers'] }[];
  close(): Promise<void>;
}

async function receiver(handle: (req: IncomingMessage, res: ServerResponse) => void): Promise<TestReceiver> {
  const seen: TestReceiver['seen'] = [];
  const server: Server = createServer((req, res) => {
    seen.push({ path: req.url ?? '', headers: req.headers });
    handle(req, res);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

const FAST = { batch: 100, idleMs: 50, firstRetryMs: 50, maxRetryMs: 200, timeoutMs: 1_000, leaseMs: 10_000 };

let redis: Redis;
let prefix: string;
let log: string[];
let metrics: Metrics;
const open: { shipper: AuditShipper; agent: Agent; receivers: TestReceiver[] }[] = [];

beforeAll(() => {
  redis = testRedis();
});
afterEach(async () => {
  for (const { shipper, agent, receivers } of open.splice(0)) {
    await shipper.stop(0);
    await agent.close();
    await Promise.all(receivers.map((r) => r.close()));
  }
  await deleteKeys(redis, prefix);
});
afterAll(async () => {
  await redis.quit();
});

/** Writes one request's audit entries (created, pending) and starts shipping them to `url`. */
async function ship(
  url: string,
  receivers: TestReceiver[],
  written: { detail?: string; secrets?: string[]; secret?: string; more?: string[]; legacy?: boolean } = {},
): Promise<void> {
  prefix = uniquePrefix('audit-receivers');
  const store = new RequestStore(redis, { prefix });
  // As an earlier version stored an entry: its fields, the reason verbatim (chained entries are scrubbed when written).
  if (written.legacy)
    await redis.xadd(
      `${prefix}:audit`,
      '*',
      'requestId',
      'R0OLD',
      'state',
      'created',
      'actor',
      'U0DEV',
      'detail',
      written.detail ?? '',
    );
  else await store.create(resizeRequest(), 'U0DEV', written.detail ?? 'rule: one approver');
  for (const detail of written.more ?? []) await store.create(resizeRequest(), 'U0DEV', detail);
  log = [];
  const logger = createLogger(
    { level: 'debug' },
    new Writable({
      write(chunk, _encoding, done) {
        log.push(String(chunk));
        done();
      },
    }),
  );
  const agent = new Agent();
  metrics = createMetrics({ defaultMetrics: false });
  const shipper = startAuditShipper(
    {
      redis,
      prefix,
      url,
      secrets: written.secrets,
      secret: written.secret,
      dispatcher: agent,
      logger,
      metrics,
      userAgent: 'test',
    },
    FAST,
  );
  open.push({ shipper, agent, receivers });
}

/** The ids the consumer group has delivered and not acknowledged. */
async function pendingCount(): Promise<number> {
  try {
    const [count] = (await redis.xpending(requestKeys(prefix).audit, AUDIT_EXPORT_GROUP)) as [number];
    return count;
  } catch {
    return Number.POSITIVE_INFINITY; // the group is not created yet
  }
}

async function until(done: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`not ${what}; log:\n${log.join('')}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('the audit export and its receiver', { timeout: 60_000 }, () => {
  it("sends the URL's user:password@ as Basic authentication (a receiver behind basic auth), never in the log", async () => {
    const expected = `Basic ${Buffer.from('vector:p@ss w0rd-91b3').toString('base64')}`;
    const logs = await receiver((req, res) => {
      req.resume();
      res.writeHead(req.headers.authorization === expected ? 204 : 401).end();
    });
    // The password percent-encoded, as a URL needs it.
    await ship(`${logs.url.replace('http://', 'http://vector:p%40ss%20w0rd-91b3@')}/audit?team=ops`, [logs]);
    await until(() => logs.seen.some((s) => s.headers.authorization === expected), 'sent with Basic auth');
    await until(async () => (await pendingCount()) === 0 && log.length > 0, 'acknowledged');
    expect(logs.seen.every((s) => s.path === '/audit?team=ops')).toBe(true);
    expect(log.join('')).not.toContain('audit export failing');
    for (const secret of ['p@ss', 'p%40ss', 'w0rd-91b3']) expect(log.join('')).not.toContain(secret);
  });

  it('scrubs secrets from the entries it ships, as the logs do (history written before typed text was scrubbed)', async () => {
    const bodies: string[] = [];
    const logs = await receiver((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => {
        body += chunk.toString();
      });
      req.on('end', () => {
        bodies.push(body);
        res.writeHead(204).end();
      });
    });
    const agentToken = `cloudops_agent_${'Zq8_-'.repeat(9)}`;
    const apiKey = 'configured-api-key-4d1f';
    // As an earlier version stored a reason: verbatim.
    const detail = `urgent, ${agentToken} and xoxb-111-222-abcDEF and ${apiKey}`;
    await ship(`${logs.url}/audit`, [logs], { detail, secrets: [apiKey], legacy: true });
    await until(async () => (await pendingCount()) === 0 && bodies.length > 0, 'shipped');
    const shipped = bodies.join('');
    expect(shipped).toContain('urgent, [redacted] and [redacted] and [redacted]');
    for (const secret of [agentToken, 'xoxb-111', apiKey]) expect(shipped).not.toContain(secret);
  });

  it('does not follow a redirect: a 3xx is a failed post, retried at the same URL', async () => {
    const elsewhere = await receiver((req, res) => {
      req.resume();
      res.writeHead(204).end();
    });
    const logs = await receiver((req, res) => {
      req.resume();
      res.writeHead(307, { location: `${elsewhere.url}/stolen` }).end();
    });
    await ship(`${logs.url}/audit`, [logs, elsewhere]);
    await until(() => logs.seen.length >= 3, 'retried');
    expect(elsewhere.seen).toEqual([]);
    expect(await pendingCount()).toBeGreaterThan(0);
    expect(log.join('')).toContain('"status":307');
  });

  it('gives up on a POST whose answer never ends (200, then a byte now and then) at its total deadline', async () => {
    let posts = 0;
    const logs = await receiver((req, res) => {
      req.resume();
      posts += 1;
      if (posts > 1) return void res.writeHead(204).end();
      res.writeHead(200);
      const drip = setInterval(() => res.write(' '), 50);
      res.on('close', () => clearInterval(drip));
    });
    await ship(`${logs.url}/audit`, [logs]);
    await until(() => posts === 1, 'posted');
    // Written while the first POST drips: shipped only if the export gets past it.
    await new RequestStore(redis, { prefix }).create(resizeRequest(), 'U0DEV', 'written meanwhile');
    // The drip resets any idle timer; only a deadline for the whole POST lets the export go on.
    await until(async () => posts >= 2 && (await pendingCount()) === 0, 'past the dripping answer');
  });

  it('a receiver answering 413: the batch is split until it fits; an entry too large alone goes trimmed', async () => {
    const bodies: string[] = [];
    // As a proxy or a log system with a request-size limit: anything over 2,500 bytes is refused with a 413 (a
    // self-contained entry with its hash and seal is about 800 bytes before its details).
    const logs = await receiver((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => {
        body += chunk.toString();
      });
      req.on('end', () => {
        if (Buffer.byteLength(body) > 2_500) return void res.writeHead(413).end();
        bodies.push(body);
        res.writeHead(204).end();
      });
    });
    const huge = `reason ${'x'.repeat(20_000)}`;
    await ship(`${logs.url}/audit`, [logs], { detail: huge, more: ['second', 'third', 'fourth', 'fifth'] });
    await until(async () => (await pendingCount()) === 0 && bodies.length > 0, 'everything shipped');
    const shipped = bodies.flatMap((b) => JSON.parse(b) as { id: string; details: string | null }[]);
    const ids = await redis.xrange(requestKeys(prefix).audit, '-', '+');
    expect(new Set(shipped.map((e) => e.id))).toEqual(new Set(ids.map(([id]) => id)));
    const trimmed = shipped.find((e) => e.details?.startsWith('reason xxx'));
    expect(trimmed?.details).toMatch(/ … \[trimmed: 20007 characters in all\]$/);
    expect(log.join('')).toContain('audit entry too large for the receiver; shipped trimmed');
    expect(await metricValue('cloudops_audit_export_entries_total', { outcome: 'trimmed' })).toBe(1);
  });

  it('an entry the receiver refuses (413) even trimmed is set aside loudly: a log line and a metric, the rest ships', async () => {
    const bodies: string[] = [];
    const logs = await receiver((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => {
        body += chunk.toString();
      });
      req.on('end', () => {
        // One entry is refused whatever its size: only the set-aside lets the ones behind it through.
        if (body.includes('refused-by-receiver')) return void res.writeHead(413).end();
        bodies.push(body);
        res.writeHead(204).end();
      });
    });
    await ship(`${logs.url}/audit`, [logs], { detail: 'refused-by-receiver', more: ['behind it'] });
    await until(async () => (await pendingCount()) === 0 && bodies.join('').includes('behind it'), 'shipped');
    const line = log.find((l) => l.includes('audit entry set aside'));
    expect(line).toBeDefined();
    expect(JSON.parse(line ?? '{}')).toMatchObject({ level: 'error', status: 413 });
    expect(await metricValue('cloudops_audit_export_entries_total', { outcome: 'set_aside' })).toBe(1);
  });

  it('signs the timestamp with the body (x-cloudops-timestamp), so a captured batch cannot be replayed later', async () => {
    const got: { body: string; headers: IncomingMessage['headers'] }[] = [];
    const logs = await receiver((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => {
        body += chunk.toString();
      });
      req.on('end', () => {
        got.push({ body, headers: req.headers });
        res.writeHead(204).end();
      });
    });
    const secret = 'audit-receivers-secret-6c2e';
    await ship(`${logs.url}/audit`, [logs], { secret });
    await until(() => got.length > 0, 'posted');
    const [first] = got;
    const timestamp = String(first?.headers['x-cloudops-timestamp']);
    expect(timestamp).toMatch(/^\d{10}$/);
    expect(Math.abs(Number(timestamp) - Date.now() / 1000)).toBeLessThan(30);
    const expected = `sha256=${createHmac('sha256', secret).update(`${timestamp}.${first?.body}`).digest('hex')}`;
    expect(first?.headers['x-cloudops-signature']).toBe(expected);
  });

  it('scrubs a password inside a URL typed in a reason (scheme://user:password@) from what it ships', async () => {
    const bodies: string[] = [];
    const logs = await receiver((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => {
        body += chunk.toString();
      });
      req.on('end', () => {
        bodies.push(body);
        res.writeHead(204).end();
      });
    });
    const detail =
      'see https://deploy:Hunter2-pa55@git.example.com/ops/runbook and ftp://u:p%40ss-99@files.example';
    await ship(`${logs.url}/audit`, [logs], { detail });
    await until(async () => (await pendingCount()) === 0 && bodies.length > 0, 'shipped');
    const shipped = bodies.join('');
    expect(shipped).toContain(
      'see https://deploy:[redacted]@git.example.com/ops/runbook and ftp://u:[redacted]@files.example',
    );
    for (const secret of ['Hunter2', 'p%40ss-99']) expect(shipped).not.toContain(secret);
  });
});

/** The value of a counter with `labels` in the shipper's metrics (0 when never counted). */
async function metricValue(name: string, labels: Record<string, string>): Promise<number> {
  const text = await metrics.registry.metrics();
  const wanted = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .join(',');
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${wanted}}`));
  return line ? Number(line.split(' ').at(-1)) : 0;
}
