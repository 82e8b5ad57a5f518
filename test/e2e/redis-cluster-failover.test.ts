import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.ts';
import { loadEnv } from '../../src/config/env.ts';
import { redisTarget } from '../../src/config/redis-connection.ts';
import { FAST_VM_LOCK } from '../../src/jobs/retry-policy.ts';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import {
  BATCH,
  CALL_LATENCY_MS,
  FINAL,
  failoverPolicyYaml,
  failoverSeed,
  requestFor,
  threadTexts,
  vmids,
} from '../helpers/failover-batch.ts';
import { CHANNELS, type Harness, startHarness, USERS } from '../helpers/harness.ts';

// docs/operations.md#redis-cluster: a failover inside a Redis Cluster (CLUSTER FAILOVER on a replica) loses no
// request, no approval and no reply, and sends no POST twice. The whole bot (ROLE=all) runs on 3 masters and 3
// replicas of the test's own, reached only through REDIS_CLUSTER_NODES; the master failed over is the one serving
// the bot's hash tag, where all its keys are.

let cluster: LocalCluster;
let h: Harness;
beforeAll(async () => {
  cluster = await startLocalCluster({ masters: 3, replicas: 1 });
  h = await startHarness({
    role: 'all',
    policyYaml: failoverPolicyYaml,
    simSeed: failoverSeed,
    // REDIS_URL's host is not used on a cluster: only its password and TLS.
    env: () => ({ REDIS_URL: 'redis://unused.invalid:1', REDIS_CLUSTER_NODES: cluster.nodesEnv }),
    redisTarget: redisTarget(loadEnv({ REDIS_CLUSTER_NODES: cluster.nodesEnv })),
    startOptions: { vmLock: FAST_VM_LOCK },
  });
}, 120_000);
afterAll(async () => {
  await h?.close();
  await cluster?.stop();
});

describe('Redis Cluster failover (CLUSTER FAILOVER) in the middle of approved work', () => {
  it('every request ends in a final state, no POST is sent twice, every reply is posted once', async () => {
    const batch: { request: CloudRequest; message: { ts: string } }[] = [];
    for (const vmid of vmids.slice(0, BATCH)) batch.push(await requestFor(h, vmid));
    // Every call of the batch (a fault applies to one call unless told): all are in flight at the failover.
    h.sim.fault('resize', { kind: 'latency', ms: CALL_LATENCY_MS, times: BATCH });

    // Half the approvals click in; once the first POSTs are under way, the master of the bot's slot is failed over
    // while the other half click in, one every 20 ms.
    const approve = ({ request, message }: (typeof batch)[number]) =>
      h.click('approve', request.id, USERS.lead, CHANNELS.prod, message);
    const first = Promise.all(batch.slice(0, BATCH / 2).map(approve));
    await h.slack.waitFor(() => h.sim.calls.filter((c) => c.route === 'resize').length >= 2, 30_000);
    const failing = cluster.failover(`${h.prefix}:audit`);
    const second: Promise<{ status: number }>[] = [];
    for (const item of batch.slice(BATCH / 2)) {
      second.push(approve(item));
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const failover = await failing;
    const answers = [...(await first), ...(await Promise.all(second))];
    for (const response of answers) expect(response.status).toBe(200);

    const finals = await Promise.all(
      batch.map(({ request }) => h.waitForRequest(request.id, (r) => FINAL.has(r.state), 30_000)),
    );
    h.sim.clearFaults();

    // After the failover the bot works on the new master: one more request, approved and run.
    expect(await cluster.masterOf(`${h.prefix}:audit`)).toBe(failover.to);
    const after = await requestFor(h, vmids[BATCH]!);
    await h.click('approve', after.request.id, USERS.lead, CHANNELS.prod, after.message);
    const afterDone = await h.waitForRequest(after.request.id, (r) => FINAL.has(r.state), 30_000);
    expect(afterDone.state).toBe('succeeded');

    const all = [...batch, after];
    // No POST twice: at most one resize call per VM, and every succeeded request was applied once.
    const posts = h.sim.calls.filter((c) => c.route === 'resize');
    for (const { request } of all) {
      expect(posts.filter((c) => c.path.includes(`/vm/${request.vmid}/`)).length).toBeLessThanOrEqual(1);
    }
    const succeeded = [...finals, afterDone].filter((r) => r.state === 'succeeded');
    expect(h.sim.applied).toHaveLength(succeeded.length);

    // Every reply once: the approval and the outcome in each thread, none twice.
    await h.slack.waitFor(() => all.every(({ message }) => threadTexts(h, message.ts).length >= 2), 30_000);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    for (const { request, message } of all) {
      const texts = threadTexts(h, message.ts);
      expect(texts.filter((t) => t.startsWith('Approved by'))).toHaveLength(1);
      expect(new Set(texts).size).toBe(texts.length);
      expect(texts).toHaveLength(2);
      const final = await h.store.get(request.id);
      expect(FINAL.has(final?.state ?? 'missing')).toBe(true);
    }
    expect(h.slack.problems).toEqual([]);
    console.info(
      `redis-cluster-failover: master ${failover.from} -> ${failover.to} in ${Math.round(failover.ms)} ms; states ${JSON.stringify(
        Object.fromEntries(
          ['succeeded', 'unknown', 'refused'].map((s) => [s, finals.filter((r) => r.state === s).length]),
        ),
      )}; ${posts.length} POSTs for ${all.length} requests`,
    );
  }, 120_000);
});
