import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parsePolicy, policyVersionOf } from '../../src/config/policy.ts';
import { FilePolicySource } from '../../src/config/policy-source.ts';
import { sealKeysFrom } from '../../src/config/seal-keys.ts';
import { createLogger } from '../../src/observability/logger.ts';
import type { AuditContext } from '../../src/requests/audit/append.ts';
import { readStoredChain } from '../../src/requests/audit/read.ts';
import { verifyChain } from '../../src/requests/audit/verify.ts';
import { RequestStore } from '../../src/requests/store/store.ts';
import { policyReloader } from '../../src/startup/policy-reload.ts';
import { resizeRequest } from '../fixtures/requests.ts';
import { deleteKeys, testRedis, uniquePrefix } from '../helpers/redis.ts';
import { TEST_SEAL_KEY } from '../helpers/seal.ts';

// Reloads against what can go on around them (docs/policy.md#reload): the file replaced while it is read, several
// reloads asked at once, and approvals in flight while the policy changes.
const V1 = 'approvers: [U0LEAD]\nretention_days: 30\n';
const V2 = 'approvers: [U0LEAD, U0SECOND]\nretention_days: 60\n';

let dir: string;
let redis: Redis;
const prefixes: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cloudops-reload-races-'));
  redis = testRedis();
});
afterAll(async () => {
  for (const prefix of prefixes) await deleteKeys(redis, prefix);
  await redis.quit();
  await rm(dir, { recursive: true, force: true });
});

/** Replaces `path` atomically with `text`, as an editor or a deploy tool does. */
async function replace(path: string, text: string, n: number): Promise<void> {
  await writeFile(`${path}.${n}.tmp`, text);
  await rename(`${path}.${n}.tmp`, path);
}

describe('FilePolicySource', () => {
  it('a file replaced while it is read: the version is always that of the policy parsed', async () => {
    const path = join(dir, 'swap.yml');
    await writeFile(path, V1);
    const source = await FilePolicySource.open(path);
    for (let i = 0; i < 40; i++) {
      // The swap races the read: whichever bytes were read, the version and the policy must be of the same ones.
      await Promise.all([source.reload(), replace(path, i % 2 === 0 ? V2 : V1, i)]);
      const expected = source.version() === policyVersionOf(V1) ? V1 : V2;
      expect([policyVersionOf(V1), policyVersionOf(V2)]).toContain(source.version());
      expect(source.current()).toEqual(parsePolicy(expected, path));
    }
  });

  it('reloads asked at once run in order: the file as it is last is what stays', async () => {
    const path = join(dir, 'burst.yml');
    await writeFile(path, V1);
    const source = await FilePolicySource.open(path);
    const reloads: Promise<unknown>[] = [];
    for (let i = 0; i < 10; i++) {
      await replace(path, i % 2 === 0 ? V2 : V1, 100 + i);
      reloads.push(source.reload());
    }
    await Promise.all(reloads);
    expect(source.version()).toBe(policyVersionOf(V1));
    expect(source.current().retention_days).toBe(30);
  });
});

describe('approvals in flight during a reload', () => {
  it('keep one sealed chain; each entry names one version, a request never goes back to the old; one policy_changed', async () => {
    const prefix = uniquePrefix('reload-race');
    prefixes.push(prefix);
    const path = join(dir, 'race.yml');
    await writeFile(path, V1);
    const source = await FilePolicySource.open(path);
    const audit: AuditContext = {
      sealer: sealKeysFrom(TEST_SEAL_KEY),
      policyVersion: () => source.version(),
    };
    // Two processes' stores on connections of their own, as the web and worker roles hold them.
    const other = testRedis();
    const stores = [redis, other].map((r) => new RequestStore(r, { prefix, audit }));
    const created = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        stores[i % 2]!.create({ ...resizeRequest(), requiredApprovals: 2 }, 'U0DEV'),
      ),
    );
    const reload = policyReloader({
      source,
      redis,
      prefix,
      audit,
      logger: createLogger({ level: 'silent' }),
      now: () => new Date(),
    });
    await writeFile(path, V2);
    // Every request gets two approvals, from both stores at once, while two processes reload the same change.
    await Promise.all([
      ...created.flatMap((request, i) => [
        stores[i % 2]!.approve(request.id, 'U0LEAD'),
        stores[(i + 1) % 2]!.approve(request.id, 'U0SECOND'),
      ]),
      reload('SIGHUP'),
      reload('SIGHUP'),
    ]);
    await other.quit();
    const chain = await readStoredChain(redis, prefix);
    expect(
      verifyChain(chain.records, {
        sealer: sealKeysFrom(TEST_SEAL_KEY),
        head: chain.head,
        anchor: chain.anchor,
      }),
    ).toMatchObject({ ok: true, checked: 30 * 2 + 30 * 2 + 1 });
    const versions = new Set([policyVersionOf(V1), policyVersionOf(V2)]);
    expect(chain.records.every((r) => versions.has(r.policy_version as string))).toBe(true);
    expect(chain.records.filter((r) => r.act === 'policy_changed')).toHaveLength(1);
    for (const request of created) {
      const named = chain.records.filter((r) => r.request_id === request.id).map((r) => r.policy_version);
      const firstNew = named.indexOf(policyVersionOf(V2));
      if (firstNew !== -1) expect(named.slice(firstNew)).not.toContain(policyVersionOf(V1));
    }
    expect(chain.records.filter((r) => r.act === 'approved')).toHaveLength(30);
  });
});
