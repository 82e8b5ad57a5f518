import { afterAll, describe, expect, it } from 'vitest';
import { LINK_TTL_MS, LinkStore, tokenKey } from '../../src/verify/links.ts';
import { deleteKeys, keysUnder, testRedis, uniquePrefix } from '../helpers/redis.ts';

// The approvers' link store on real Redis: what a link is bound to, that only its hash is stored, that reading it
// uses nothing up, and that of many completions at once exactly one uses it.
const redis = testRedis();
const prefix = uniquePrefix('links');
let now = new Date('2026-11-25T09:00:00Z').getTime();
const store = new LinkStore(redis, prefix, 'https://cloudops.example.com', () => new Date(now));
const claims = {
  requestId: 'RQ1',
  version: 3,
  approver: 'U0LEAD',
  teamId: 'T0TEST',
  methods: ['passkey' as const],
};

afterAll(async () => {
  await deleteKeys(redis, prefix);
  redis.disconnect();
});

const tokenOf = (url: string) => url.slice(url.lastIndexOf('/') + 1);

describe('verification links', () => {
  it('a 256-bit token on PUBLIC_URL, stored only as its hash, bound to the claims', async () => {
    const url = await store.approvalLinks().issue(claims);
    expect(url).toMatch(/^https:\/\/cloudops\.example\.com\/verify\/[A-Za-z0-9_-]{43}$/);
    const token = tokenOf(url);
    const keys = await keysUnder(redis, prefix);
    expect(keys.join()).not.toContain(token);
    expect(keys).toContain(`${prefix}:verify:link:${tokenKey(token)}`);
    expect(await store.peek(token)).toEqual({
      status: 'open',
      purpose: { kind: 'approve', claims },
      expiresAt: now + LINK_TTL_MS,
    });
  });

  it('reading a link uses nothing up; of many completions at once, one uses it', async () => {
    const token = tokenOf(await store.approvalLinks().issue(claims));
    for (let i = 0; i < 3; i++) expect((await store.peek(token)).status).toBe('open');
    const results = await Promise.all(Array.from({ length: 20 }, () => store.consume(token)));
    expect(results.filter((r) => r === 'ok')).toHaveLength(1);
    expect(new Set(results.filter((r) => r !== 'ok'))).toEqual(new Set(['used']));
    expect(await store.peek(token)).toEqual({ status: 'used' });
  });

  it('expires after ten minutes; an unknown or malformed token is unknown', async () => {
    const token = tokenOf(await store.approvalLinks().issue(claims));
    now += LINK_TTL_MS;
    expect((await store.peek(token)).status).toBe('open');
    now += 1;
    expect(await store.peek(token)).toEqual({ status: 'expired' });
    expect(await store.consume(token)).toBe('expired');
    expect(await store.peek('A'.repeat(43))).toEqual({ status: 'unknown' });
    expect(await store.consume('../../etc')).toBe('unknown');
  });
});
