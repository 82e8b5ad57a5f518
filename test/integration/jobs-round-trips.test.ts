import type { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { requestKeys } from '../../src/requests/store.ts';
import { PROJECT } from '../fixtures/requests.ts';
import { type JobsEnv, resizeOf, startJobsEnv } from './jobs-env.ts';

/**
 * What an execute job asks of Redis for its request and its VM, on the real path (BullMQ worker, simulator over
 * HTTP): the lock's script reads both, the move to sending and the success (with the VM's facts) are one script each.
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
  const deadline = Date.now() + 10_000;
  while (!(await env.queues.execute.getJob(id))?.finishedOn) {
    if (Date.now() > deadline) throw new Error(`execute job ${id} not finished after 10 s`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('an execute job, counted', () => {
  it("reads its request and the VM's facts with the lock and writes the success with the facts: 3 commands on them", async () => {
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
    // and a compare-and-set to succeeded: 7.
    expect(onThem.map((c) => [c.name, c.args.includes(factsKey)])).toEqual([
      ['evalsha', true],
      ['evalsha', false],
      ['evalsha', true],
    ]);
    expect((await env.store.get(request.id))?.state).toBe('succeeded');
    // The VM's facts say what the API applied, and when.
    expect(await env.vmFacts.get(PROJECT.uuid, 102)).toMatchObject({ cores: 6 });
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
      ['evalsha', true], // lock, request and facts
      ['evalsha', false], // to sending
      ['evalsha', true], // step 1 and its facts
      ['hgetall', true], // the facts again for step 2, with its marker
      ['evalsha', true], // success and the facts of step 2
    ]);
    expect((await env.store.get(request.id))?.state).toBe('succeeded');
    expect(await env.vmFacts.get(PROJECT.uuid, 102)).toMatchObject({ wanMode: 'ipv6' });
  });
});
