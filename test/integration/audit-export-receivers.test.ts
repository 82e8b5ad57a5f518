import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import { Agent } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type AuditShipper, startAuditShipper } from '../../src/audit-export/shipper.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createMetrics } from '../../src/observability/metrics.ts';
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
  written: { detail?: string; secrets?: string[] } = {},
): Promise<void> {
  prefix = uniquePrefix('audit-receivers');
  if (written.detail === undefined)
    await new RequestStore(redis, { prefix }).create(resizeRequest(), 'U0DEV');
  // As an earlier version stored an entry: its fields, the reason verbatim.
  else
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
      written.detail,
    );
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
  const shipper = startAuditShipper(
    {
      redis,
      prefix,
      url,
      secrets: written.secrets,
      dispatcher: agent,
      logger,
      metrics: createMetrics({ defaultMetrics: false }),
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
    await ship(`${logs.url}/audit`, [logs], { detail, secrets: [apiKey] });
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
});
