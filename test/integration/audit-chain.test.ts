import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sealKeysFrom } from '../../src/config/seal-keys.ts';
import { bodyOf, hashOf } from '../../src/requests/audit/chain.ts';
import { canonicalJson } from '../../src/requests/model/canonical-json.ts';
import { requestKeys } from '../../src/requests/store/keys.ts';
import { RequestStore } from '../../src/requests/store/store.ts';
import { resizeRequest } from '../fixtures/requests.ts';
import { deleteKeys, testRedis, testRedisUrl, uniquePrefix } from '../helpers/redis.ts';
import { runProcess } from '../helpers/run-process.ts';

// The audit chain against the ways a Redis writer would rewrite history (docs/operations.md#verifying-the-audit):
// each check runs the shipped `cloudops audit verify`, on Redis and on an exported copy.
const repo = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(repo, 'bin', 'cloudops.mjs');
const SEAL_KEY = 'a'.repeat(16) + 'b'.repeat(16) + 'c'.repeat(16) + 'd'.repeat(16);
const DAY = 86_400_000;

let redis: Redis;
let prefix: string;
let dir: string;
let clock: Date;
let store: RequestStore;

beforeAll(async () => {
  redis = testRedis();
  dir = await mkdtemp(join(tmpdir(), 'cloudops-audit-chain-'));
});
afterAll(async () => {
  await redis.quit();
  await rm(dir, { recursive: true, force: true });
});
beforeEach(() => {
  prefix = uniquePrefix('chain');
  clock = new Date('2026-01-05T09:00:00Z');
  store = new RequestStore(redis, {
    prefix,
    now: () => clock,
    auditRetentionDays: 30,
    audit: { sealer: sealKeysFrom(SEAL_KEY), policyVersion: () => '0123456789ab' },
  });
});
afterEach(async () => {
  await deleteKeys(redis, prefix);
});

function cloudops(args: string[], extra: Record<string, string> = {}) {
  return runProcess(process.execPath, [BIN, ...args], {
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      REDIS_URL: testRedisUrl(),
      REDIS_PREFIX: prefix,
      POLICY_FILE: join(dir, 'none.yml'),
      SEAL_KEY,
      ...extra,
    },
  });
}

/** Three requests, each created, approved and queued: 12 entries. */
async function history(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    clock = new Date(clock.getTime() + 60_000);
    const created = await store.create(resizeRequest(), `U0DEV${i}`);
    await store.approve(created.id, 'U0LEAD', undefined, { queue: true });
  }
}

type Row = [string, string[]];

/** The stream as stored: ids and fields. */
const rows = async (): Promise<Row[]> => (await redis.xrange(requestKeys(prefix).audit, '-', '+')) as Row[];

/** Rewrites the whole stream as `edit` returns it (same ids where kept): what a writer with Redis access can do. */
async function rewrite(edit: (rows: Row[]) => Row[]): Promise<void> {
  const next = edit(await rows());
  const key = requestKeys(prefix).audit;
  await redis.del(key);
  for (const [id, fields] of next) await redis.xadd(key, id, ...fields);
}

const field = (row: Row, name: string) => row[1][row[1].indexOf(name) + 1] as string;
const withField = (row: Row, name: string, value: string): Row => [
  row[0],
  row[1].map((v, i) => (i > 0 && row[1][i - 1] === name && i % 2 === 1 ? value : v)),
];

describe('cloudops audit verify on Redis', () => {
  it('passes an untouched chain with the count checked, hashes and seals', async () => {
    await history();
    const run = await cloudops(['audit', 'verify']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('audit chain in Redis verified: 12 entries, hashes and seals\n');
  });

  it('names an entry removed from the middle', async () => {
    await history();
    const all = await rows();
    await redis.xdel(requestKeys(prefix).audit, all[5]![0]);
    const run = await cloudops(['audit', 'verify']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`an entry was removed between ${all[4]![0]} and ${all[6]![0]}`);
  });

  it('names an entry edited in place', async () => {
    await history();
    const target = (await rows())[6]!;
    await rewrite((all) =>
      all.map((row) =>
        row[0] === target[0] ? withField(row, 'e', field(row, 'e').replace('"U0LEAD"', '"U0EVIL"')) : row,
      ),
    );
    const run = await cloudops(['audit', 'verify']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`entry ${target[0]} was changed: its hash does not match its content`);
  });

  it('names an entry edited with its hash and every later hash recomputed, but no key for the seals', async () => {
    await history();
    const target = (await rows())[6]![0];
    await rewrite((all) => {
      let prev = '';
      return all.map((row) => {
        const body = JSON.parse(field(row, 'e')) as Record<string, unknown>;
        if (row[0] === target) body.actor = 'U0EVIL';
        body.prev = prev;
        const hash = hashOf(body);
        prev = hash;
        return withField(withField(row, 'e', canonicalJson(body)), 'h', hash);
      });
    });
    await redis.set(requestKeys(prefix).auditHead, field((await rows()).at(-1)!, 'h'));
    const run = await cloudops(['audit', 'verify']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      `entry ${target} was changed: its seal does not match (rewritten without the key)`,
    );
    // Without the key only the hashes are checked: such a forgery passes them, as the message says.
    const unkeyed = await cloudops(['audit', 'verify'], { SEAL_KEY: '' });
    expect(unkeyed.code).toBe(0);
    expect(unkeyed.stdout).toContain('hashes only (set SEAL_KEY to check the seals)');
  });

  it('names an entry inserted with a valid hash and seal of its own (a replayed entry)', async () => {
    await history();
    const all = await rows();
    // A copy of entry 1, given an id between 3 and 4 and chained after 3: its hash and seal are its own.
    await rewrite((rs) => {
      const copy = JSON.parse(field(rs[1]!, 'e')) as Record<string, unknown>;
      copy.prev = field(rs[3]!, 'h');
      const [ms, seq] = rs[3]![0].split('-');
      const id = `${ms}-${Number(seq) + 1}`;
      const hash = hashOf(copy);
      const seal = sealKeysFrom(SEAL_KEY).seal('audit', hash);
      const inserted: Row = [id, ['e', canonicalJson(copy), 'h', hash, 's', seal]];
      return [...rs.slice(0, 4), inserted, ...rs.slice(4)];
    });
    const inserted = (await rows())[4]![0];
    const run = await cloudops(['audit', 'verify']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`entry ${inserted} was inserted`);
    expect(all).toHaveLength(12);
  });

  it('names entries swapped out of order', async () => {
    await history();
    const all = await rows();
    await rewrite((rs) =>
      rs.map((row, i) => (i === 4 ? [row[0], rs[5]![1]] : i === 5 ? [row[0], rs[4]![1]] : row)),
    );
    const run = await cloudops(['audit', 'verify']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`entry ${all[4]![0]} is out of order`);
  });

  it('names entries removed from the end (the head still names the last) and from the start (no anchor)', async () => {
    await history();
    const all = await rows();
    await rewrite((rs) => rs.slice(0, 10));
    const tail = await cloudops(['audit', 'verify']);
    expect(tail.code).toBe(1);
    expect(tail.stderr).toContain(`entries after ${all[9]![0]} were removed`);
    await rewrite((rs) => rs.slice(2));
    await redis.set(requestKeys(prefix).auditHead, field(all[9]!, 'h'));
    const head = await cloudops(['audit', 'verify']);
    expect(head.code).toBe(1);
    expect(head.stderr).toContain(`entries were removed before ${all[2]![0]}`);
  });

  it('still verifies after retention trimmed the oldest entries, from the sealed anchor; a moved anchor is named', async () => {
    await history();
    clock = new Date(clock.getTime() + 20 * DAY);
    const later = await store.create(resizeRequest(), 'U0LATE');
    clock = new Date(clock.getTime() + 15 * DAY);
    await store.removeExpired();
    const left = await rows();
    expect(left).toHaveLength(2);
    expect(JSON.parse(field(left[0]!, 'e'))).toMatchObject({ request_id: later.id, act: 'created' });
    const run = await cloudops(['audit', 'verify']);
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('audit chain in Redis verified: 2 entries, hashes and seals\n');
    // An anchor moved to hide more removals, without the key.
    const anchor = JSON.parse((await redis.get(requestKeys(prefix).auditAnchor)) as string) as {
      hash: string;
    };
    await redis.set(
      requestKeys(prefix).auditAnchor,
      JSON.stringify({ ...anchor, hash: field(left[0]!, 'h') }),
    );
    const moved = await cloudops(['audit', 'verify']);
    expect(moved.code).toBe(1);
    expect(moved.stderr).toContain('the anchor (last entry removed by retention');
  });

  it('keeps one chain when two processes append at once', async () => {
    const writer = join(repo, 'test', 'helpers', 'audit-writer-process.ts');
    const run = (actor: string) =>
      runProcess(process.execPath, ['--import', 'tsx', writer], {
        cwd: repo,
        env: {
          ...process.env,
          CLOUDOPS_AUDIT_WRITER: JSON.stringify({
            redisUrl: testRedisUrl(),
            prefix,
            sealKey: SEAL_KEY,
            requests: 25,
            actor,
          }),
        },
        timeoutMs: 60_000,
      });
    const results = await Promise.all([run('U0ONE'), run('U0TWO')]);
    expect(results.map((r) => [r.code, r.stderr])).toEqual([
      [0, ''],
      [0, ''],
    ]);
    const verified = await cloudops(['audit', 'verify']);
    expect(verified.stderr).toBe('');
    // Each request: created, pending, approved.
    expect(verified.stdout).toBe('audit chain in Redis verified: 150 entries, hashes and seals\n');
  });
});

describe("an operator's CLI act", () => {
  it('names the OS user and host, and the name given with --as, in a chained entry', async () => {
    const policyFile = join(dir, `${prefix}.yml`);
    await writeFile(
      policyFile,
      `approvers: [U0LEAD]\nagents:\n  - name: night-agent\n    token_sha256: "${'ab'.repeat(32)}"\n    on_behalf_of: U0DEV\n`,
    );
    const run = await cloudops(['agents', 'disable', 'night-agent', '--as', 'alice'], {
      POLICY_FILE: policyFile,
    });
    expect(run.stderr).toBe('');
    const [entry] = (await rows()).map(
      ([, fields]) => JSON.parse(fields[1] as string) as Record<string, unknown>,
    );
    expect(entry).toMatchObject({
      act: 'agent',
      actor: `cli:alice@${hostname()}`,
      details: 'disabled agent night-agent',
      requester: { cli: { user: userInfo().username, host: hostname(), as: 'alice' } },
    });
    expect(entry?.policy_version).toMatch(/^[0-9a-f]{12}$/);
    expect((await cloudops(['audit', 'verify'])).stdout).toContain('verified: 1 entries, hashes and seals');
  });
});

describe('cloudops audit verify --file (an exported copy)', () => {
  async function exported(): Promise<string[]> {
    await history();
    const out = await cloudops(['audit', '--since', '2000-01-01', '--json']);
    expect(out.code).toBe(0);
    return out.stdout.trim().split('\n');
  }
  const check = async (lines: string[], extra: Record<string, string> = {}) => {
    const file = join(dir, `${prefix}.jsonl`);
    await writeFile(file, `${lines.join('\n')}\n`);
    return cloudops(['audit', 'verify', '--file', file], extra);
  };

  it('prints prev, hash, seal and policy_version at the top level, and the copy verifies', async () => {
    const lines = await exported();
    expect(lines).toHaveLength(12);
    const first = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(first).toMatchObject({ prev: '', policy_version: '0123456789ab', act: 'created' });
    expect(first.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(first.seal).toMatch(/^[0-9a-f]{12}\./);
    expect(hashOf(bodyOf(first))).toBe(first.hash);
    const run = await check(lines);
    expect(run.stdout).toBe(
      `audit chain in ${join(dir, `${prefix}.jsonl`)} verified: 12 entries, hashes and seals\n`,
    );
  });

  it('names a deleted, an edited and an inserted line', async () => {
    const lines = await exported();
    const ids = lines.map((l) => (JSON.parse(l) as { id: string }).id);
    const deleted = await check([...lines.slice(0, 3), ...lines.slice(4)]);
    expect(deleted.code).toBe(1);
    expect(deleted.stderr).toContain(`an entry was removed between ${ids[2]} and ${ids[4]}`);
    const edited = await check(lines.map((l, i) => (i === 7 ? l.replace('"U0LEAD"', '"U0EVIL"') : l)));
    expect(edited.code).toBe(1);
    expect(edited.stderr).toContain(`entry ${ids[7]} was changed`);
    const extra = JSON.parse(lines[2]!) as Record<string, unknown>;
    const inserted = await check([
      ...lines.slice(0, 6),
      JSON.stringify({ ...extra, id: `${ids[5]}9` }),
      ...lines.slice(6),
    ]);
    expect(inserted.code).toBe(1);
    expect(inserted.stderr).toMatch(/was inserted|out of order/);
  });

  it("reads the webhook's JSON arrays, a duplicate delivery counting once", async () => {
    const lines = await exported();
    const records = lines.map((l) => JSON.parse(l) as unknown);
    const batches = [records.slice(0, 5), records.slice(4, 12)].map((b) => JSON.stringify(b));
    const run = await check(batches);
    expect(run.stdout).toContain('verified: 12 entries');
    const file = join(dir, `${prefix}.json`);
    await writeFile(file, JSON.stringify(records));
    const whole = await cloudops(['audit', 'verify', '--file', file]);
    expect(whole.stdout).toContain('verified: 12 entries');
    expect(await readFile(file, 'utf8')).toContain('"prev"');
  });
});
