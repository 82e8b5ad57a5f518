import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SentinelGroup, startSentinelGroup } from '../../sim/local-sentinel.ts';
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

// docs/operations.md#redis-sentinel: a failover (SENTINEL FAILOVER) loses no request, no approval and no reply. The whole bot (ROLE=all)
// runs on a master, two replicas and 3 Sentinels of the test's own, reached only through REDIS_SENTINELS. Two
// replicas: the second stays on the old master for a moment after the first is promoted, and would acknowledge
// writes the new master never gets if the bot waited for one replica only.

let group: SentinelGroup;
let h: Harness;
beforeAll(async () => {
  group = await startSentinelGroup({ replicas: 2, downAfterMs: 1000, failoverTimeoutMs: 5000 });
  const sentinels = group.sentinelPorts.map((port) => ({ host: '127.0.0.1', port }));
  h = await startHarness({
    role: 'all',
    policyYaml: failoverPolicyYaml,
    simSeed: failoverSeed,
    // REDIS_URL's host is not used with Sentinels: only its db (and password, TLS).
    env: () => ({ REDIS_URL: 'redis://unused.invalid:1/0', REDIS_SENTINELS: group.sentinels }),
    redisTarget: { url: 'redis://127.0.0.1/0', sentinels, sentinelName: group.name },
    startOptions: { vmLock: FAST_VM_LOCK },
    // Its lines name the requests, for explainApplied.
    logLevel: 'info',
  });
}, 120_000);
afterAll(async () => {
  await h?.close();
  await group?.stop();
});

/**
 * When a POST the sim applied did not end its request succeeded: prints, for each such request, its final state,
 * outcomes, audit trail, its POST's timing against the failover's, and the bot's log lines that name it.
 */
async function explainApplied(
  all: { request: CloudRequest }[],
  failover: { startMs: number; from: number; to: number; ms: number },
): Promise<void> {
  const t = (ms: number | undefined) => (ms === undefined ? '-' : `${Math.round(ms - failover.startMs)}ms`);
  const lines = [
    `failover ${failover.from} -> ${failover.to}: started at 0ms, new master seen at ${Math.round(failover.ms)}ms`,
  ];
  for (const { request } of all) {
    if (!h.sim.applied.some((a) => a.vmid === request.vmid)) continue;
    const final = await h.store.get(request.id);
    if (final?.state === 'succeeded') continue;
    lines.push(`request ${request.id} (vm ${request.vmid}): ${final?.state ?? 'missing'}`);
    lines.push(`  outcomes ${JSON.stringify(final?.outcomes)}`);
    for (const call of h.sim.calls.filter((c) => c.path.includes(`/vm/${request.vmid}/`)))
      lines.push(
        `  call ${call.method} ${call.route} ${call.status} from ${t(call.startMs)} to ${t(call.endMs)}`,
      );
    for (const entry of await h.auditOf(request.id)) lines.push(`  audit ${entry}`);
    const job = await h.queues.execute.getJob(request.id);
    if (job)
      lines.push(
        `  job ${await job.getState()} attempts ${job.attemptsMade} stalled ${job.stalledCounter} returned ${JSON.stringify(job.returnvalue)} ${job.failedReason ?? ''}`,
      );
    for (const line of h.logs.filter((l) => l.includes(request.id))) lines.push(`  log ${line.trim()}`);
  }
  lines.push(
    ...h.logs
      .filter((l) => !all.some(({ request }) => l.includes(request.id)))
      .map((l) => `other log ${l.trim()}`),
  );
  console.error(lines.join('\n'));
}

describe('Redis failover (SENTINEL FAILOVER) in the middle of approved work', () => {
  it('every request ends in a final state, no POST is sent twice, every reply is posted once', async () => {
    const batch: { request: CloudRequest; message: { ts: string } }[] = [];
    for (const vmid of vmids.slice(0, BATCH)) batch.push(await requestFor(h, vmid));
    // Every call of the batch (a fault applies to one call unless told): all are in flight at the failover.
    h.sim.fault('resize', { kind: 'latency', ms: CALL_LATENCY_MS, times: BATCH });

    // Approvals click in; once the first POSTs are under way, the master is failed over.
    const clicks = Promise.all(
      batch.map(({ request, message }) => h.click('approve', request.id, USERS.lead, CHANNELS.prod, message)),
    );
    await h.slack.waitFor(() => h.sim.calls.filter((c) => c.route === 'resize').length >= 2, 30_000);
    const failoverStartMs = performance.timeOrigin + performance.now();
    const failover = await group.failover();
    for (const response of await clicks) expect(response.status).toBe(200);

    const finals = await Promise.all(
      batch.map(({ request }) => h.waitForRequest(request.id, (r) => FINAL.has(r.state), 30_000)),
    );
    h.sim.clearFaults();

    // After the failover the bot works on the new master: one more request, approved and run. Its message and
    // replies wait for a replica to follow the new master (the old one, reconfigured by the Sentinels).
    await group.waitForReplicas();
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
    if (h.sim.applied.length !== succeeded.length)
      await explainApplied(all, { startMs: failoverStartMs, ...failover });
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
      `redis-failover: master ${failover.from} -> ${failover.to} in ${Math.round(failover.ms)} ms; states ${JSON.stringify(
        Object.fromEntries(
          ['succeeded', 'unknown', 'refused'].map((s) => [s, finals.filter((r) => r.state === s).length]),
        ),
      )}; ${posts.length} POSTs for ${all.length} requests`,
    );
  }, 120_000);
});
