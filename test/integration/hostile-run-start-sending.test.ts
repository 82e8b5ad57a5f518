import { afterEach, beforeEach, expect, it } from 'vitest';
import { AuditLog } from '../../src/requests/audit/audit.ts';
import { requestKeys } from '../../src/requests/store/keys.ts';
import { type JobsEnv, resizeOf, startJobsEnv } from './jobs-env.ts';

/**
 * A Redis writer without SEAL_KEY rewrites a queued request's stored text to state "sending" at step 0, with a change
 * nobody approved and no seals at all. The lock's script only reads a request that is not queued, and the worker
 * used to send a request it found in "sending" straight on (the check before sending ran only for a queued start): a
 * resumed run is judged again (requests/lifecycle/run-moves.ts beforeResume), and a real one still goes on.
 */
let env: JobsEnv;
beforeEach(async () => {
  env = await startJobsEnv({ name: 'hostile-run-start-sending' });
});
afterEach(async () => {
  await env.close();
});

async function jobFinished(id: string) {
  const deadline = Date.now() + 20_000;
  while (!(await env.queues.execute.getJob(id))?.finishedOn) {
    if (Date.now() > deadline) throw new Error(`execute job ${id} not finished`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

it('a request a Redis writer put in "sending" at step 0, unsealed, is not sent', async () => {
  await env.queues.notify.pause();
  const request = await env.queueRequest(resizeOf(env, 102, { cores: 6 }));
  const key = requestKeys(env.prefix).request(request.id);
  // The writer: another change, no approvals, no seals, "sending" at step 0 (the tail kept so the store reads it).
  const { state, version, revision, updatedAt, approvals, approvedBy, ...rest } = request;
  const forged = {
    ...rest,
    params: { ...request.params, target: { cores: 16 }, steps: [{ cores: 16 }] },
    approvals: [],
    state: 'sending',
    version,
    revision,
    updatedAt,
  };
  await env.redis.set(key, JSON.stringify(forged));
  env.startWorkers();
  await jobFinished(request.id);
  const applied = env.sim.applied.filter((a) => a.vmid === 102);
  const audit = (await new AuditLog(env.redis, env.prefix).read({ requestId: request.id })).map(
    (e) => `${e.state}: ${e.detail ?? ''}`,
  );
  // Nothing the approver did not approve reaches the API; the run ends refused, the seal's failure audited.
  const seen = { applied, final: (await env.store.get(request.id))?.state, audit };
  expect(seen, JSON.stringify(seen)).toMatchObject({ applied: [], final: 'refused' });
  expect(audit.some((line) => line.startsWith('seal_invalid: '))).toBe(true);
});

it('a real sealed request found in "sending" (its worker stopped before the POST, no marker) goes on, once', async () => {
  await env.queues.notify.pause();
  const request = await env.queueRequest(resizeOf(env, 102, { cores: 6 }));
  // As a worker that moved it and stopped before marking its first step: the store's own move, nothing sent.
  const moved = await env.store.transition(
    request.id,
    { from: ['queued'], to: 'sending', actor: 'cloudops', detail: 'sending step 1' },
    request,
  );
  expect(moved.ok).toBe(true);
  env.startWorkers();
  await jobFinished(request.id);
  expect((await env.store.get(request.id))?.state).toBe('succeeded');
  expect(env.sim.applied.filter((a) => a.vmid === 102)).toHaveLength(1);
});
