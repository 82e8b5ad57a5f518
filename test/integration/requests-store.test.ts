import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AuditLog } from '../../src/requests/audit/audit.ts';
import { newRequestId } from '../../src/requests/store/keys.ts';
import { RequestStore } from '../../src/requests/store/store.ts';
import { IllegalTransitionError } from '../../src/requests/store/transitions.ts';
import { resizeRequest } from '../fixtures/requests.ts';
import { deleteKeys, testRedis, uniquePrefix } from '../helpers/redis.ts';

let redis: Redis;
let prefix: string;
let clock: Date;
let store: RequestStore;

beforeAll(() => {
  redis = testRedis();
});
afterAll(async () => {
  await redis.quit();
});
beforeEach(() => {
  prefix = uniquePrefix('store');
  clock = new Date('2025-03-01T10:00:00Z');
  store = new RequestStore(redis, { prefix, now: () => clock });
});
afterEach(async () => {
  await deleteKeys(redis, prefix);
});

describe('RequestStore', () => {
  it('creates ids of 8 Crockford base32 characters that never read as a number', () => {
    const ids = new Set(Array.from({ length: 2000 }, () => newRequestId()));
    expect(ids.size).toBe(2000);
    for (const id of ids) expect(id).toMatch(/^[A-HJKMNP-TV-Z][0-9A-HJKMNP-TV-Z]{7}$/);
  });

  it('creates a request and reads it back with the store-owned fields filled in', async () => {
    const created = await store.create(resizeRequest(), 'U0DEV');
    expect(created).toMatchObject({
      state: 'pending',
      version: 1,
      nextStep: 0,
      outcomes: [],
      createdAt: '2025-03-01T10:00:00.000Z',
      updatedAt: '2025-03-01T10:00:00.000Z',
    });
    expect(await store.get(created.id)).toEqual(created);
    expect(await store.get('NOPE0000')).toBeUndefined();
  });

  it('lets exactly one of 50 concurrent transitions win, and audits it once', async () => {
    const created = await store.create(resizeRequest(), 'U0DEV');
    const approvers = Array.from({ length: 50 }, (_, i) => `U0APPROVER${i}`);
    // Separate connections, so the 50 calls really interleave on the server.
    const clients = approvers.map(() => testRedis());
    try {
      const results = await Promise.all(
        approvers.map((user, i) =>
          new RequestStore(clients[i]!, { prefix, now: () => clock }).transition(created.id, {
            from: ['pending'],
            to: 'approved',
            actor: user,
            patch: { approvedBy: user },
          }),
        ),
      );
      const winners = results.filter((r) => r.ok);
      expect(winners).toHaveLength(1);
      for (const loser of results.filter((r) => !r.ok)) {
        expect(loser).toMatchObject({ ok: false, reason: 'wrong_state', request: { state: 'approved' } });
      }
      const stored = await store.get(created.id);
      expect(stored?.state).toBe('approved');
      expect(stored?.version).toBe(2);
      expect(stored?.approvedBy).toBe(winners[0]!.ok ? winners[0]!.request.approvedBy : undefined);
      const approvals = (await new AuditLog(redis, prefix).read({ requestId: created.id })).filter(
        (e) => e.state === 'approved',
      );
      expect(approvals).toHaveLength(1);
      expect(approvals[0]!.actor).toBe(stored?.approvedBy);
    } finally {
      await Promise.all(clients.map((c) => c.quit()));
    }
  });

  it('retries on a version conflict while the state still allows the move', async () => {
    const created = await store.create(resizeRequest(), 'U0DEV');
    // Concurrent non-state updates bump the version under the transition's feet; it must still land.
    const [moved] = await Promise.all([
      store.transition(created.id, { from: ['pending'], to: 'approved', actor: 'U0LEAD' }),
      ...Array.from({ length: 20 }, (_, i) => store.update(created.id, { messageTs: `1700000000.${i}` })),
    ]);
    expect(moved.ok).toBe(true);
    const stored = await store.get(created.id);
    expect(stored?.state).toBe('approved');
    expect(stored?.version).toBe(22);
    expect(stored?.messageTs).toMatch(/^1700000000\.\d+$/);
  });

  it('answers not_found and wrong_state without writing', async () => {
    expect(
      await store.transition('ZZZZZZZZ', { from: ['pending'], to: 'approved', actor: 'U0LEAD' }),
    ).toEqual({
      ok: false,
      reason: 'not_found',
    });
    const created = await store.create(resizeRequest(), 'U0DEV');
    await store.transition(created.id, { from: ['pending'], to: 'rejected', actor: 'U0LEAD' });
    const late = await store.transition(created.id, { from: ['pending'], to: 'approved', actor: 'U0LEAD' });
    expect(late).toMatchObject({
      ok: false,
      reason: 'wrong_state',
      request: { state: 'rejected', version: 2 },
    });
  });

  it('throws on an arrow the state machine does not have', async () => {
    const created = await store.create(resizeRequest(), 'U0DEV');
    await expect(
      store.transition(created.id, { from: ['pending'], to: 'succeeded', actor: 'x' }),
    ).rejects.toThrow(IllegalTransitionError);
    await expect(
      store.transition(created.id, { from: ['queued', 'succeeded'], to: 'sending', actor: 'x' }),
    ).rejects.toThrow(/from succeeded to sending/);
    await expect(
      store.transition(created.id, { from: ['unknown'], to: 'queued', actor: 'x' }),
    ).rejects.toThrow(IllegalTransitionError);
    expect((await store.get(created.id))?.version).toBe(1);
  });

  it('never lets a patch overwrite the id, state or version', async () => {
    const created = await store.create(resizeRequest(), 'U0DEV');
    const updated = await store.update(created.id, {
      id: 'OTHER000',
      state: 'succeeded',
      version: 99,
      messageTs: '1.2',
    } as Partial<typeof created>);
    expect(updated).toMatchObject({ id: created.id, state: 'pending', version: 2, messageTs: '1.2' });
    expect(await store.update('ZZZZZZZZ', { messageTs: '1' })).toBeUndefined();
  });

  it('records every state change in order, with its actor and detail', async () => {
    const created = await store.create(resizeRequest(), 'U0DEV');
    const steps = [
      { from: 'pending', to: 'approved', actor: 'U0LEAD' },
      { from: 'approved', to: 'queued', actor: 'cloudops' },
      { from: 'queued', to: 'sending', actor: 'cloudops' },
      { from: 'sending', to: 'unknown', actor: 'cloudops', detail: 'timeout after sending' },
      { from: 'unknown', to: 'resolved_done', actor: 'U0LEAD', detail: 'checked in the portal' },
    ] as const;
    for (const step of steps) {
      clock = new Date(clock.getTime() + 1000);
      const result = await store.transition(created.id, { ...step, from: [step.from] });
      expect(result.ok).toBe(true);
    }
    const entries = await new AuditLog(redis, prefix).read({ requestId: created.id });
    expect(entries.map((e) => [e.state, e.actor, e.detail])).toEqual([
      ['created', 'U0DEV', undefined],
      ['pending', 'U0DEV', undefined],
      ['approved', 'U0LEAD', undefined],
      ['queued', 'cloudops', undefined],
      ['sending', 'cloudops', undefined],
      ['unknown', 'cloudops', 'timeout after sending'],
      ['resolved_done', 'U0LEAD', 'checked in the portal'],
    ]);
    expect(entries[2]!.at).toBe('2025-03-01T10:00:01.000Z');
    expect(entries.every((e) => e.requestId === created.id)).toBe(true);
    const ids = entries.map((e) => e.id);
    expect([...ids].sort(compareStreamIds)).toEqual(ids);
  });

  it('lists a channel newest first, only its own requests, up to the limit', async () => {
    const made: string[] = [];
    for (let i = 0; i < 5; i++) {
      clock = new Date(clock.getTime() + 60_000);
      made.push((await store.create(resizeRequest({ vmid: 100 + i }), 'U0DEV')).id);
    }
    await store.create(resizeRequest({ channel: 'C0OTHER' }), 'U0DEV');
    const listed = await store.listByChannel('C0PROD', 3);
    expect(listed.map((r) => r.id)).toEqual(made.slice(2).reverse());
    expect((await store.listByChannel('C0PROD')).map((r) => r.id)).toEqual([...made].reverse());
    expect(await store.listByChannel('C0EMPTY')).toEqual([]);
  });
});

function compareStreamIds(a: string, b: string): number {
  const [am, as] = a.split('-').map(Number) as [number, number];
  const [bm, bs] = b.split('-').map(Number) as [number, number];
  return am - bm || as - bs;
}

describe('RequestStore: verified approvals', () => {
  it('the revision moves with the state only: not with approvals short of the count, notes or message updates', async () => {
    const created = await store.create(
      resizeRequest({ requiredApprovals: 3, approvers: ['U0A', 'U0B', 'U0C'] }),
      'U0DEV',
    );
    expect(created.revision).toBe(1);
    await store.update(created.id, { messageTs: '1.2' });
    await store.note(created.id, { note: 'reminder', actor: 'cloudops' }, () => ({
      remindedAt: clock.toISOString(),
    }));
    const one = await store.approve(created.id, 'U0A');
    const two = await store.approve(created.id, 'U0B', undefined, { revision: 1 });
    expect(two).toMatchObject({ ok: true, request: { version: 5, revision: 1 } });
    expect(one.ok).toBe(true);
    // A re-planned approval that asks for verification now: links issued before no longer fit.
    const replanned = await store.update(created.id, { verify: ['sso'] });
    expect(replanned?.revision).toBe(2);
    const last = await store.approve(created.id, 'U0C', undefined, {
      verified: { method: 'sso', subject: 's-c' },
    });
    expect(last).toMatchObject({ ok: true, request: { state: 'approved', revision: 3 } });
  });

  it('a request that needs verified approvals counts only a verification by a method it allows, at the link’s revision', async () => {
    const created = await store.create(
      resizeRequest({ requiredApprovals: 2, approvers: ['U0A', 'U0B'], verify: ['passkey'] }),
      'U0DEV',
    );
    expect(await store.approve(created.id, 'U0A')).toMatchObject({ ok: false, reason: 'unverified' });
    expect(
      await store.approve(created.id, 'U0A', undefined, { verified: { method: 'sso', subject: 's' } }),
    ).toMatchObject({ ok: false, reason: 'unverified' });
    expect(
      await store.approve(created.id, 'U0A', undefined, {
        verified: { method: 'passkey', subject: 'cred-a' },
        revision: 2,
      }),
    ).toMatchObject({ ok: false, reason: 'changed' });
    const counted = await store.approve(created.id, 'U0A', undefined, {
      verified: { method: 'passkey', subject: 'cred-a' },
      revision: 1,
    });
    expect(counted).toMatchObject({
      ok: true,
      request: {
        state: 'pending',
        approvals: [{ user: 'U0A', verified: { method: 'passkey', subject: 'cred-a' } }],
      },
    });
    const entries = await new AuditLog(redis, prefix).read({ requestId: created.id });
    expect(entries.at(-1)).toMatchObject({
      state: 'approval',
      actor: 'U0A',
      detail: 'approval 1 of 2, verified: passkey, credential cred-a',
    });
  });
});

describe("RequestStore: the caller's copy as the expected current version", () => {
  /** A store on a connection of its own whose commands are counted: each is a round trip here (no pipelining). */
  async function countedStore(): Promise<{
    store: RequestStore;
    commands: string[];
    close: () => Promise<void>;
  }> {
    const connection = testRedis();
    // Connected first, so the connection's own set-up is not counted.
    await connection.ping();
    const commands: string[] = [];
    const send = connection.sendCommand.bind(connection);
    connection.sendCommand = (...args: Parameters<Redis['sendCommand']>) => {
      commands.push(args[0].name);
      return send(...args);
    };
    return {
      store: new RequestStore(connection, { prefix, now: () => clock }),
      commands,
      close: async () => void (await connection.quit()),
    };
  }

  it('with the current copy a transition is the compare-and-set alone: one round trip instead of two', async () => {
    const counted = await countedStore();
    try {
      // Its first write reads the audit chain's head; from then on the store knows it.
      const created = await counted.store.create(resizeRequest(), 'U0DEV');
      counted.commands.length = 0;
      const approved = await counted.store.transition(
        created.id,
        { from: ['pending'], to: 'approved', actor: 'U0LEAD' },
        created,
      );
      expect(approved.ok).toBe(true);
      expect(counted.commands).toEqual(['evalsha']);
      // Without a copy it reads first, as before.
      counted.commands.length = 0;
      await counted.store.transition(created.id, { from: ['approved'], to: 'queued', actor: 'cloudops' });
      expect(counted.commands).toEqual(['get', 'evalsha']);
      expect(await store.get(created.id)).toMatchObject({ state: 'queued', version: 3 });
    } finally {
      await counted.close();
    }
  });

  it('a copy that is behind lands on what the store holds (the conflict answers it), losing no write', async () => {
    const created = await store.create(resizeRequest(), 'U0DEV');
    await store.update(created.id, { messageTs: '1700000000.1' });
    const moved = await store.transition(
      created.id,
      { from: ['pending'], to: 'approved', actor: 'U0LEAD' },
      created,
    );
    expect(moved.ok).toBe(true);
    expect(await store.get(created.id)).toMatchObject({
      state: 'approved',
      version: 3,
      messageTs: '1700000000.1',
    });
  });

  it('a copy that is behind never decides "does not apply": the request is read and decided again', async () => {
    const created = await store.create(resizeRequest({ state: 'queued' }), 'cloudops');
    const sending = await store.transition(created.id, {
      from: ['queued'],
      to: 'sending',
      actor: 'cloudops',
    });
    if (!sending.ok) throw new Error('not sending');
    await store.transition(
      created.id,
      { from: ['sending'], to: 'queued', actor: 'cloudops' },
      sending.request,
    );
    // The copy says 'sending'; the store says 'queued', from where the move applies.
    const again = await store.transition(
      created.id,
      { from: ['queued'], to: 'sending', actor: 'cloudops' },
      sending.request,
    );
    expect(again.ok && again.request).toMatchObject({ state: 'sending', version: 4 });
    const late = await store.transition(created.id, { from: ['queued'], to: 'sending', actor: 'x' }, created);
    expect(late).toMatchObject({
      ok: false,
      reason: 'wrong_state',
      request: { state: 'sending', version: 4 },
    });
  });

  it('a copy changed by its caller is a conflict, even at the same version: the stored request is what moves', async () => {
    const created = await store.create(resizeRequest({ reason: 'as asked' }), 'U0DEV');
    const forged = { ...created, reason: 'changed on the way', approvers: ['U0MALLORY'] };
    const moved = await store.transition(
      created.id,
      { from: ['pending'], to: 'approved', actor: 'U0LEAD' },
      forged,
    );
    expect(moved.ok && moved.request).toMatchObject({ reason: 'as asked', approvers: created.approvers });
    expect(await store.get(created.id)).toMatchObject({
      state: 'approved',
      version: 2,
      reason: 'as asked',
      approvers: created.approvers,
    });
  });

  it('50 concurrent approvals from the same copy: exactly one wins, the others find it approved', async () => {
    const created = await store.create(resizeRequest(), 'U0DEV');
    const clients = Array.from({ length: 50 }, () => testRedis());
    try {
      const results = await Promise.all(
        clients.map((client, i) =>
          new RequestStore(client, { prefix, now: () => clock }).transition(
            created.id,
            { from: ['pending'], to: 'approved', actor: `U0APPROVER${i}` },
            created,
          ),
        ),
      );
      expect(results.filter((r) => r.ok)).toHaveLength(1);
      for (const loser of results.filter((r) => !r.ok)) {
        expect(loser).toMatchObject({ ok: false, reason: 'wrong_state', request: { state: 'approved' } });
      }
      expect((await store.get(created.id))?.version).toBe(2);
    } finally {
      await Promise.all(clients.map((c) => c.quit()));
    }
  });
});
