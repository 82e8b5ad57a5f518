import { PassThrough } from 'node:stream';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AuditLog, exportAudit } from '../../src/requests/audit/audit.ts';
import { parseSince, SinceError, writeAuditJsonLines } from '../../src/requests/audit/export.ts';
import type { AuditEntry } from '../../src/requests/model/types.ts';
import { RequestStore } from '../../src/requests/store/store.ts';
import { resizeRequest } from '../fixtures/requests.ts';
import { deleteKeys, testRedis, uniquePrefix } from '../helpers/redis.ts';

let redis: Redis;
let prefix: string;
let clock: Date;
let store: RequestStore;

const T0 = new Date('2025-03-01T00:00:00Z');
const hours = (h: number) => new Date(T0.getTime() + h * 3_600_000);

beforeAll(() => {
  redis = testRedis();
});
afterAll(async () => {
  await redis.quit();
});
beforeEach(() => {
  prefix = uniquePrefix('audit');
  clock = T0;
  store = new RequestStore(redis, { prefix, now: () => clock });
});
afterEach(async () => {
  await deleteKeys(redis, prefix);
});

/** Three requests created at T0, T0+1h and T0+2h, each approved 10 minutes later. */
async function history(): Promise<string[]> {
  const ids: string[] = [];
  for (const h of [0, 1, 2]) {
    clock = hours(h);
    const created = await store.create(resizeRequest(), `U0DEV${h}`);
    clock = hours(h + 1 / 6);
    await store.transition(created.id, { from: ['pending'], to: 'approved', actor: 'U0LEAD' });
    ids.push(created.id);
  }
  return ids;
}

async function collect(gen: AsyncGenerator<AuditEntry>): Promise<AuditEntry[]> {
  const out: AuditEntry[] = [];
  for await (const entry of gen) out.push(entry);
  return out;
}

describe('AuditLog', () => {
  it('reads by time range, by request and with a limit', async () => {
    const ids = await history();
    const log = new AuditLog(redis, prefix);
    expect(await log.read()).toHaveLength(9);
    const sinceOne = await log.read({ since: hours(1) });
    expect(sinceOne.map((e) => e.requestId)).toEqual([ids[1], ids[1], ids[1], ids[2], ids[2], ids[2]]);
    const window = await log.read({ since: hours(1), until: hours(1.5) });
    expect(window.map((e) => e.state)).toEqual(['created', 'pending', 'approved']);
    const one = await log.read({ requestId: ids[0] });
    expect(one.map((e) => [e.state, e.actor, e.at])).toEqual([
      ['created', 'U0DEV0', T0.toISOString()],
      ['pending', 'U0DEV0', T0.toISOString()],
      ['approved', 'U0LEAD', hours(1 / 6).toISOString()],
    ]);
    expect(await log.read({ limit: 2 })).toHaveLength(2);
  });

  it('keeps stream ids increasing when the clock goes backwards', async () => {
    clock = hours(5);
    const a = await store.create(resizeRequest(), 'U0DEV');
    clock = hours(1);
    await store.transition(a.id, { from: ['pending'], to: 'cancelled', actor: 'U0DEV' });
    const entries = await new AuditLog(redis, prefix).read({ requestId: a.id });
    expect(entries.map((e) => e.state)).toEqual(['created', 'pending', 'cancelled']);
    expect(entries[2]!.at).toBe(hours(1).toISOString());
  });

  it('stores each entry as one chained record (canonical JSON, hash), and reads the same when the clock went back', async () => {
    clock = hours(5);
    const a = await store.create(resizeRequest(), 'U0DEV');
    await store.transition(a.id, { from: ['pending'], to: 'approved', actor: 'U0LEAD' });
    clock = hours(1);
    await store.transition(a.id, { from: ['approved'], to: 'queued', actor: 'cloudops' });
    const raw = await redis.xrange(`${prefix}:audit`, '-', '+');
    expect(raw.map(([, fields]) => fields.filter((_, i) => i % 2 === 0))).toEqual(Array(4).fill(['e', 'h']));
    const entries = await new AuditLog(redis, prefix).read({ requestId: a.id });
    expect(entries.map((e) => [e.state, e.at])).toEqual([
      ['created', hours(5).toISOString()],
      ['pending', hours(5).toISOString()],
      ['approved', hours(5).toISOString()],
      ['queued', hours(1).toISOString()],
    ]);
    expect(entries.map((e) => e.record?.prev)).toEqual([
      '',
      ...entries.slice(0, -1).map((e) => e.record?.hash),
    ]);
  });

  it('exports everything since a time, in pages, oldest first', async () => {
    const ids = await history();
    // More than one page of the exporter (500 entries).
    clock = hours(3);
    for (let i = 0; i < 300; i++) {
      const r = await store.create(resizeRequest(), 'U0BULK');
      await store.transition(r.id, { from: ['pending'], to: 'expired', actor: 'cloudops' });
    }
    const all = await collect(exportAudit(redis, prefix));
    expect(all).toHaveLength(9 + 900);
    const since = await collect(exportAudit(redis, prefix, hours(2)));
    expect(since).toHaveLength(3 + 900);
    expect(since[0]).toMatchObject({ requestId: ids[2], state: 'created' });
    expect(new Set(since.map((e) => e.id)).size).toBe(since.length);
  });

  it('writes JSON lines for the CLI', async () => {
    await history();
    const out = new PassThrough();
    const chunks: Buffer[] = [];
    out.on('data', (c: Buffer) => chunks.push(c));
    const count = await writeAuditJsonLines(redis, prefix, hours(1), out);
    const lines = Buffer.concat(chunks).toString('utf8').trim().split('\n');
    expect(count).toBe(6);
    expect(lines).toHaveLength(6);
    const first = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(first).toMatchObject({ act: 'created', actor: 'U0DEV1', time: hours(1).toISOString() });
    expect(Object.keys(first)).toEqual(expect.arrayContaining(['prev', 'hash', 'policy_version']));
  });
});

describe('parseSince', () => {
  const now = new Date('2025-03-10T12:00:00Z');
  it('reads durations and ISO dates', () => {
    expect(parseSince('24h', now).toISOString()).toBe('2025-03-09T12:00:00.000Z');
    expect(parseSince('7d', now).toISOString()).toBe('2025-03-03T12:00:00.000Z');
    expect(parseSince('30m', now).toISOString()).toBe('2025-03-10T11:30:00.000Z');
    expect(parseSince('2w', now).toISOString()).toBe('2025-02-24T12:00:00.000Z');
    expect(parseSince('2025-03-01T08:00:00Z', now).toISOString()).toBe('2025-03-01T08:00:00.000Z');
    expect(parseSince('2025-03-01T08:00:00+02:00', now).toISOString()).toBe('2025-03-01T06:00:00.000Z');
    expect(parseSince('2025-03-01', now).toISOString()).toBe('2025-03-01T00:00:00.000Z');
  });
  it('refuses anything else with one clear line', () => {
    for (const bad of ['', 'yesterday', '24', '-1d', '2025-13-45', '7x']) {
      expect(() => parseSince(bad, now)).toThrow(SinceError);
    }
  });
});
