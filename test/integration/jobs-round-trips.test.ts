import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { markHomeSeen, startHomeRefresh } from '../../src/jobs/home.ts';
import { QUEUE_REDIS_OPTIONS } from '../../src/jobs/redis-options.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createApprovalPolicy } from '../../src/requests/approval/approvers.ts';
import { AuditLog } from '../../src/requests/audit/audit.ts';
import { chainAfter } from '../../src/requests/audit/chain.ts';
import { standaloneEntry } from '../../src/requests/audit/entry.ts';
import { readStoredChain } from '../../src/requests/audit/read.ts';
import { verifyChain } from '../../src/requests/audit/verify.ts';
import { predictMove } from '../../src/requests/lifecycle/run-start.ts';
import { requestKeys } from '../../src/requests/store/keys.ts';
import { AUDIT_APPEND_LUA } from '../../src/requests/store/scripts.ts';
import { RequestStore } from '../../src/requests/store/store.ts';
import { VmFactsStore } from '../../src/requests/vm-facts.ts';
import { homeRenderer } from '../../src/slack/blocks/home.ts';
import { SlackApi } from '../../src/slack-api/client.ts';
import { PROJECT, resizeRequest } from '../fixtures/requests.ts';
import { type JobsEnv, resizeOf, startJobsEnv } from './jobs-env.ts';

/**
 * What an execute job asks of Redis for its request and its VM, on the real path (BullMQ worker, simulator over
 * HTTP): the lock's script reads both and moves a plain run to sending with its first marker; the success (with the
 * VM's facts) is one script.
 */
let env: JobsEnv;

beforeEach(async () => {
  env = await startJobsEnv({ name: 'jobs-round-trips' });
});

afterEach(async () => {
  await env.close();
});

/** Records every command `connection` sends from now on: its name and its arguments as text. */
function recordCommands(connection: Redis): { name: string; args: string[] }[] {
  const seen: { name: string; args: string[] }[] = [];
  const send = connection.sendCommand.bind(connection);
  connection.sendCommand = (...call: Parameters<Redis['sendCommand']>) => {
    seen.push({ name: call[0].name, args: call[0].args.map((a) => String(a)) });
    return send(...call);
  };
  return seen;
}

/** Waits for the request's execute job to finish, looking at the job alone (not at the request, which is counted). */
async function jobFinished(id: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await env.queues.execute.getJob(id))?.finishedOn) {
    if (Date.now() > deadline) throw new Error(`execute job ${id} not finished after 30 s`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('an execute job, counted', () => {
  it("reads its request and the VM's facts with the lock, moves to sending with it, and writes the success with the facts: 2 commands on them", async () => {
    // Reports wait, so only the execute job touches the request.
    await env.queues.notify.pause();
    const request = await env.queueRequest(resizeOf(env, 102, { cores: 6 }));
    const requestKey = requestKeys(env.prefix).request(request.id);
    const factsKey = env.vmFacts.key(PROJECT.uuid, 102);
    const seen = recordCommands(env.redis);
    env.startWorkers();
    await jobFinished(request.id);
    const onThem = seen.filter((c) => c.args.includes(requestKey) || c.args.includes(factsKey));
    // Before: the lock script, then a get and a compare-and-set to sending, the facts read, their record, and a get
    // and a compare-and-set to succeeded: 7. Then the lock script, the move to sending (with the marker) and the
    // success: 3. Now the lock's script also moves a plain run to sending and marks its first step.
    expect(onThem.map((c) => [c.name, c.args.includes(factsKey)])).toEqual([
      ['evalsha', true], // lock, request and facts, to sending, step 1's marker
      ['evalsha', true], // success and the facts
    ]);
    const audit = await new AuditLog(env.redis, env.prefix).read({ requestId: request.id });
    expect(audit.map((e) => [e.state, e.detail])).toContainEqual(['sending', 'sending step 1']);
    expect((await env.store.get(request.id))?.state).toBe('succeeded');
    // The VM's facts say what the API applied, and when.
    expect(await env.vmFacts.get(PROJECT.uuid, 102)).toMatchObject({ cores: 6 });
    expect(env.sim.applied.filter((a) => a.vmid === 102)).toHaveLength(1);
  });

  it('a request stored before the storage order is only read by the lock script, moved in TypeScript, and stored in the order from then on', async () => {
    await env.queues.notify.pause();
    const request = await env.queueRequest(resizeOf(env, 102, { cores: 6 }));
    const requestKey = requestKeys(env.prefix).request(request.id);
    const factsKey = env.vmFacts.key(PROJECT.uuid, 102);
    // As the store wrote requests before: the state and the version among the other fields, not last.
    const { state, version, ...rest } = request;
    await env.redis.set(requestKey, JSON.stringify({ state, version, ...rest }));
    const seen = recordCommands(env.redis);
    env.startWorkers();
    await jobFinished(request.id);
    const onThem = seen.filter((c) => c.args.includes(requestKey) || c.args.includes(factsKey));
    expect(onThem.map((c) => [c.name, c.args.includes(factsKey)])).toEqual([
      ['evalsha', true], // lock, request and facts: read only
      ['evalsha', false], // to sending, with the marker in the same round trip
      ['evalsha', true], // success and the facts
    ]);
    expect(await env.redis.get(requestKey)).toMatch(
      /,"state":"succeeded","version":4,"revision":4,"updatedAt":"[^"]+"}$/,
    );
    expect(env.sim.applied.filter((a) => a.vmid === 102)).toHaveLength(1);
  });

  it('a two-step plan records each step with its write and reads the facts again for the second', async () => {
    await env.queues.notify.pause();
    const request = await env.queueRequest(
      resizeOf(env, 102, { wanMode: 'ipv6' }, { steps: [{ wanMode: 'off' }, { wanMode: 'ipv6' }] }),
    );
    const requestKey = requestKeys(env.prefix).request(request.id);
    const factsKey = env.vmFacts.key(PROJECT.uuid, 102);
    const seen = recordCommands(env.redis);
    env.startWorkers();
    await jobFinished(request.id);
    const onThem = seen.filter((c) => c.args.includes(requestKey) || c.args.includes(factsKey));
    expect(onThem.map((c) => [c.name, c.args.includes(factsKey)])).toEqual([
      ['evalsha', true], // lock, request and facts, to sending, step 1's marker (before: a script of its own)
      ['evalsha', true], // step 1 and its facts
      ['hgetall', true], // the facts again for step 2, with its marker
      ['evalsha', true], // success and the facts of step 2
    ]);
    expect((await env.store.get(request.id))?.state).toBe('succeeded');
    expect(await env.vmFacts.get(PROJECT.uuid, 102)).toMatchObject({ wanMode: 'ipv6' });
  });
});

describe("the run's start and its audit entry", () => {
  /** The commands on the request, the audit stream or the chain's head: what the run writes of the request's story. */
  function onTheStory(seen: { name: string; args: string[] }[], id: string) {
    const keys = requestKeys(env.prefix);
    return seen.filter(
      (c) =>
        c.args.includes(keys.request(id)) || c.args.includes(keys.audit) || c.args.includes(keys.auditHead),
    );
  }

  /** The chain as stored, verified, and the acts of `id` in it. */
  async function chainOf(id: string) {
    const stored = await readStoredChain(env.redis, env.prefix);
    return {
      verdict: verifyChain(stored.records, { head: stored.head }),
      acts: stored.records.filter((r) => r.request_id === id).map((r) => r.act),
      all: stored.records,
    };
  }

  it("a plain run's move to sending goes with its entry in the lock's script: lock, move, marker and entry in one round trip", async () => {
    await env.queues.notify.pause();
    const request = await env.queueRequest(resizeOf(env, 102, { cores: 6 }));
    // The move predicted from the job's copy, as the text the script writes and as the request it parses to (built
    // without parsing): the success's compare-and-set hashes that request, so the two must be the same text.
    const copy = (await env.queues.execute.getJob(request.id))?.data.request;
    expect(JSON.stringify(copy)).toBe(await env.redis.get(requestKeys(env.prefix).request(request.id)));
    const move = copy && predictMove(copy, new Date('2026-12-07T18:00:00.123Z'));
    expect(move && JSON.stringify(move.request)).toBe(move?.moved);
    expect(move?.request).toEqual(move && JSON.parse(move.moved));
    const seen = recordCommands(env.redis);
    env.startWorkers();
    await jobFinished(request.id);
    // Before: the lock's script, the entry's own append, then the success: three round trips on the story.
    expect(onTheStory(seen, request.id).map((c) => c.name)).toEqual(['evalsha', 'evalsha']);
    const chain = await chainOf(request.id);
    expect(chain.verdict).toMatchObject({ ok: true });
    expect(chain.acts).toEqual(['created', 'pending', 'approved', 'queued', 'sending', 'succeeded']);
    expect(env.sim.applied.filter((a) => a.vmid === 102)).toHaveLength(1);
  });

  it("a request written since its job's copy is moved by the script all the same, and its entry chained right after", async () => {
    await env.queues.notify.pause();
    const request = await env.queueRequest(resizeOf(env, 102, { cores: 6 }));
    // The request message's ts, stored after the job left: the job's copy is one write behind.
    await env.store.update(request.id, { messageTs: '1700000000.000100' });
    const seen = recordCommands(env.redis);
    env.startWorkers();
    await jobFinished(request.id);
    expect(onTheStory(seen, request.id).map((c) => c.name)).toEqual(['evalsha', 'evalsha', 'evalsha']);
    const chain = await chainOf(request.id);
    expect(chain.verdict).toMatchObject({ ok: true });
    expect(chain.acts).toEqual(['created', 'pending', 'approved', 'queued', 'sending', 'succeeded']);
    expect((await env.store.get(request.id))?.state).toBe('succeeded');
  });

  it("another process's entry first: the script moves the request without the entry it was given, which is chained after that one", async () => {
    await env.queues.notify.pause();
    const request = await env.queueRequest(resizeOf(env, 102, { cores: 6 }));
    // Another process appends (a policy change), so the head this process expects is one behind.
    const keys = requestKeys(env.prefix);
    const head = (await env.redis.get(keys.auditHead)) ?? '';
    const [other] = chainAfter(
      head,
      [standaloneEntry({ act: 'policy_changed', actor: 'cloudops' }, new Date().toISOString(), null)],
      undefined,
    );
    await env.redis.eval(
      `${AUDIT_APPEND_LUA}\nreturn audit_append(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4])`,
      2,
      keys.audit,
      keys.auditHead,
      Date.now(),
      other?.json ?? '',
      other?.hash ?? '',
      '',
    );
    const seen = recordCommands(env.redis);
    env.startWorkers();
    await jobFinished(request.id);
    // The lock's script (its entry refused), the entry chained again after the other's, the success.
    expect(onTheStory(seen, request.id).map((c) => c.name)).toEqual(['evalsha', 'evalsha', 'evalsha']);
    const chain = await chainOf(request.id);
    expect(chain.verdict).toMatchObject({ ok: true });
    expect(chain.acts).toEqual(['created', 'pending', 'approved', 'queued', 'sending', 'succeeded']);
    const acts = chain.all.map((r) => r.act);
    expect(acts.indexOf('policy_changed')).toBeLessThan(acts.indexOf('sending'));
    expect(env.sim.applied.filter((a) => a.vmid === 102)).toHaveLength(1);
  });
});

describe("the workers' own connection", () => {
  it("carries their requests, VM locks, send markers and reply records, and none of BullMQ's scripts", async () => {
    // As the worker role wires it: BullMQ on one connection, the workers' own keys on another.
    const records = new Redis(env.redisUrl, QUEUE_REDIS_OPTIONS);
    records.on('error', () => undefined);
    try {
      const request = await env.queueRequest(resizeOf(env, 102, { cores: 6 }));
      const ours = [
        requestKeys(env.prefix).request(request.id),
        `${env.prefix}:vmlock:`,
        `${env.prefix}:sending:`,
        `${env.prefix}:replied:`,
        `${env.prefix}:reply-sending:`,
      ];
      const touchesOurs = (c: { args: string[] }) =>
        c.args.some((a) => ours.some((key) => a.startsWith(key)));
      const onQueue = recordCommands(env.redis);
      const onRecords = recordCommands(records);
      env.startWorkers({
        records,
        store: new RequestStore(records, { prefix: env.prefix }),
        vmFacts: new VmFactsStore(records, { prefix: env.prefix }),
      });
      // Watched on a connection of its own, so the test's polling is on neither of the two.
      const watcher = new Redis(env.redisUrl);
      try {
        const replied = `${env.prefix}:replied:*`;
        for (let tries = 0; (await watcher.keys(replied)).length === 0; tries++) {
          if (tries > 400) throw new Error('no reply was recorded in 10 s');
          await new Promise((r) => setTimeout(r, 25));
        }
        expect((await new RequestStore(watcher, { prefix: env.prefix }).get(request.id))?.state).toBe(
          'succeeded',
        );
      } finally {
        watcher.disconnect();
      }

      expect(onQueue.filter(touchesOurs)).toEqual([]);
      const names = (prefix: string) => onRecords.filter((c) => c.args.some((a) => a.startsWith(prefix)));
      expect(names(`${env.prefix}:vmlock:`).length).toBeGreaterThan(0);
      expect(names(`${env.prefix}:sending:`).length).toBeGreaterThan(0);
      expect(names(`${env.prefix}:replied:`).length).toBeGreaterThan(0);
      // ioredis copies each script defined on a connection onto every auto-pipelined batch of it: none here.
      expect(Object.keys(records.scriptsSet)).toEqual([]);
      expect(Object.keys(env.redis.scriptsSet).length).toBeGreaterThan(20);
    } finally {
      records.disconnect();
    }
  });

  it("carries the App Home refresh's marks; the refresh job goes on BullMQ's", async () => {
    // As the worker role wires it: the home queue on BullMQ's connection, the marks on the records one.
    const records = new Redis(env.redisUrl, QUEUE_REDIS_OPTIONS);
    records.on('error', () => undefined);
    const homes = startHomeRefresh({
      connection: env.redis,
      records,
      prefix: env.prefix,
      logger: createLogger({ level: 'silent' }),
      store: env.store,
      approvals: createApprovalPolicy(env.policy),
      renderer: homeRenderer,
      now: () => new Date(),
      slack: new SlackApi({ apiUrl: env.slack.apiUrl, token: env.slack.botToken }),
      coalesceMs: 10,
    });
    try {
      // U0DEV opened their home; the request they made changes.
      await markHomeSeen(records, env.prefix, 'U0DEV');
      const request = await env.store.create(resizeRequest({ vmid: 102 }), 'U0DEV');
      const marks = [`${env.prefix}:home-seen:`, `${env.prefix}:home-pending:`];
      const touchesMarks = (c: { args: string[] }) =>
        c.args.some((a) => marks.some((key) => a.startsWith(key)));
      const onQueue = recordCommands(env.redis);
      const onRecords = recordCommands(records);
      const seen = env.slack.homes.length;
      await homes.changed(request);
      const published = await env.slack.waitFor(
        () => env.slack.homes.slice(seen).find((p) => p.user === 'U0DEV'),
        10_000,
      );
      expect(JSON.stringify(published.view)).toContain(request.id);

      expect(onQueue.filter(touchesMarks)).toEqual([]);
      // The mark's script, then the worker's clearing of the mark before it publishes.
      expect(onRecords.filter(touchesMarks).map((c) => c.name)).toEqual(['evalsha', 'del']);
      expect(onQueue.some((c) => c.args.some((a) => a.includes(':home:')))).toBe(true);
      expect(Object.keys(records.scriptsSet)).toEqual([]);
    } finally {
      await homes.close();
      records.disconnect();
    }
  });
});
