import { afterEach, beforeEach, expect, it } from 'vitest';
import { type JobsEnv, resizeOf, startJobsEnv } from './jobs-env.ts';

/**
 * When the lock's script moved the request itself (no usable copy in the job: a Redis writer can drop it) and what
 * follows in lockAndStart throws (the entry's append failing once, as a Redis error or AuditChainBusyError would; a
 * stored text Redis's JSON decoder reads and JSON.parse refuses), the VM's lock used to stay taken, renewed for the
 * life of the process: the VM's jobs never ran again. Now the lock is handed back and the first step's marker goes
 * (nothing was sent), so the retry starts the same step.
 */
let env: JobsEnv;
beforeEach(async () => {
  env = await startJobsEnv({ name: 'hostile-run-start-lock-leak' });
});
afterEach(async () => {
  await env.close();
});

const lockKey = (uuid: string, vmid: number) => `${env.prefix}:vmlock:${uuid.toLowerCase()}:${vmid}`;

it("a failed append after the script's own move hands the VM's lock back, and the retry sends the step once", async () => {
  await env.queues.notify.pause();
  const request = await env.queueRequest(resizeOf(env, 102, { cores: 6 }));
  // The writer drops the copy from the job's data: the script moves the request itself, the entry follows.
  const jobKey = `${env.prefix}:execute:${request.id}`;
  const data = JSON.parse((await env.redis.hget(jobKey, 'data')) as string);
  delete data.request;
  await env.redis.hset(jobKey, 'data', JSON.stringify(data));
  // The entry's append fails once.
  const record = env.store.record.bind(env.store);
  let calls = 0;
  env.store.record = async (...args: Parameters<typeof record>) => {
    if (calls++ === 0) throw new Error('append failed');
    return record(...args);
  };
  env.startWorkers();
  await expect
    .poll(async () => (await env.queues.execute.getJob(request.id))?.getState(), { timeout: 20_000 })
    .toBe('completed');
  expect(calls).toBe(1);
  expect((await env.store.get(request.id))?.state).toBe('succeeded');
  expect(env.sim.applied.filter((a) => a.vmid === 102)).toHaveLength(1);
  expect(await env.redis.pttl(lockKey(request.projectUuid, 102))).toBe(-2);
}, 30_000);

it("a stored text Redis's JSON decoder reads but JSON.parse refuses (NaN) leaves the VM's lock free", async () => {
  await env.queues.notify.pause();
  const request = await env.queueRequest(resizeOf(env, 102, { cores: 6 }));
  const key = `${env.prefix}:req:${request.id}`;
  const stored = (await env.redis.get(key)) as string;
  // The writer: an unsealed member the decoder takes (NaN) and JSON.parse does not; the job's copy no longer matches.
  await env.redis.set(key, stored.replace('"notes":[]', '"notes":[NaN]'));
  expect(await env.redis.get(key)).toContain('[NaN]');
  env.startWorkers();
  await expect
    .poll(async () => (await env.queues.execute.getJob(request.id))?.attemptsMade ?? 0, { timeout: 10_000 })
    .toBeGreaterThan(0);
  // Past the lock's 3 s TTL (FAST_VM_LOCK): a lock still renewed would still be there.
  await new Promise((r) => setTimeout(r, 4_000));
  expect(await env.redis.pttl(lockKey(request.projectUuid, 102))).toBe(-2);
  expect(env.sim.applied.filter((a) => a.vmid === 102)).toHaveLength(0);
}, 30_000);
