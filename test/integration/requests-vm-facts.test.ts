import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { knownVm, VmFactsStore } from '../../src/requests/vm-facts.ts';
import { PROJECT } from '../fixtures/requests.ts';
import { deleteKeys, testRedis, uniquePrefix } from '../helpers/redis.ts';

let redis: Redis;
let prefix: string;
let facts: VmFactsStore;

beforeAll(() => {
  redis = testRedis();
});
afterAll(async () => {
  await redis.quit();
});
beforeEach(() => {
  prefix = uniquePrefix('vmfacts');
  facts = new VmFactsStore(redis, { prefix });
});
afterEach(async () => {
  await deleteKeys(redis, prefix);
});

describe('VmFactsStore', () => {
  it('knows nothing of a VM it never touched', async () => {
    expect(await facts.get(PROJECT.uuid, 101)).toBeUndefined();
  });

  it('merges applied sizes and keeps the latest increase', async () => {
    const t1 = new Date('2025-03-01T10:00:00Z');
    const t2 = new Date('2025-03-02T10:00:00Z');
    await facts.recordApplied(PROJECT.uuid, 101, { cores: 4, ramGb: 8 }, t1, true);
    await facts.recordApplied(PROJECT.uuid, 101, { wanMode: 'off' }, t2, false);
    expect(await facts.get(PROJECT.uuid, 101)).toEqual({
      cores: 4,
      ramGb: 8,
      wanMode: 'off',
      lastIncreaseAt: t1,
      appliedAt: t2,
    });
    // An older increase recorded late does not move lastIncreaseAt back.
    await Promise.all([
      facts.recordApplied(PROJECT.uuid, 101, { cpuClass: 'regular' }, t2, true),
      facts.recordApplied(PROJECT.uuid, 101, { cores: 6 }, t1, true),
    ]);
    const after = await facts.get(PROJECT.uuid, 101);
    expect(after).toMatchObject({ cores: 6, cpuClass: 'regular', lastIncreaseAt: t2 });
    // Another VM and another project are separate.
    expect(await facts.get(PROJECT.uuid, 102)).toBeUndefined();
    expect(await facts.get('11111111-2222-3333-4444-555555555555', 101)).toBeUndefined();
  });
});

describe('knownVm', () => {
  const policyVm = {
    vmid: 101,
    name: 'web-1',
    ha: true,
    cores: 2,
    ram_gb: 4,
    os_disk_gb: 50,
    wan_mode: 'ipv4' as const,
    created_at: '2025-02-01T00:00:00Z',
  };

  it('maps the policy facts to the rules vocabulary', () => {
    expect(knownVm(policyVm, undefined, 101)).toEqual({
      vmid: 101,
      name: 'web-1',
      ha: true,
      cores: 2,
      ramGb: 4,
      osDiskGb: 50,
      wanMode: 'ipv4',
      createdAt: new Date('2025-02-01T00:00:00Z'),
    });
  });

  it('lays what the bot applied over the policy', () => {
    const at = new Date('2025-03-01T00:00:00Z');
    const known = knownVm(
      policyVm,
      { cores: 8, wanMode: 'off', privateNetwork: 'on', lastIncreaseAt: at },
      101,
    );
    expect(known).toMatchObject({
      cores: 8,
      ramGb: 4,
      wanMode: 'off',
      privateNetwork: 'on',
      lastIncreaseAt: at,
    });
  });

  it('knows only the id of a VM absent from both', () => {
    expect(knownVm(undefined, undefined, 7)).toEqual({ vmid: 7, ha: false });
  });
});
