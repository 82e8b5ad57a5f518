import { Cluster } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.ts';
import { loadEnv } from '../../src/config/env.ts';
import { redisTarget } from '../../src/config/redis-connection.ts';
import { dueKey } from '../../src/jobs/due-times.ts';
import { AuditLog } from '../../src/requests/audit/audit.ts';
import { requestKeys } from '../../src/requests/store/keys.ts';
import { CHANNELS, defaultPolicyYaml, type Harness, startHarness, USERS } from '../helpers/harness.ts';
import { keysUnder } from '../helpers/redis.ts';
import { homeAfter, homeButtons, openHome } from '../helpers/slack-events.ts';

// The whole bot (ROLE=all) on a Redis Cluster of its own (3 masters, 3 replicas), reached only through
// REDIS_CLUSTER_NODES: every key it and its queues write carries one hash tag, so every script finds its keys in
// one slot. Retention sweeps every 100 ms; the test moves the clock.
const DAY = 86_400_000;

let cluster: LocalCluster;
let h: Harness;
beforeAll(async () => {
  cluster = await startLocalCluster({ masters: 3, replicas: 1 });
  h = await startHarness({
    role: 'all',
    // Reminders after 2 hours, so a due time falls in the flow.
    policyYaml: (start) =>
      `retention_days: 30\naudit_retention_days: 30\n${defaultPolicyYaml(start)}`.replace(
        `    approvers: [${USERS.lead}, ${USERS.lead2}]\n`,
        `    approvers: [${USERS.lead}, ${USERS.lead2}]\n    approvals: { remind_after_hours: 2 }\n`,
      ),
    startOptions: {
      retentionPolicy: { intervalMs: 100, batch: 500, finishedJobAgeMs: DAY },
      duePolicy: { pollMs: 100, leaseMs: 60_000, batch: 50 },
    },
    // REDIS_URL gives only the password and TLS on a cluster: its host is not used.
    env: () => ({ REDIS_URL: 'redis://unused.invalid:1', REDIS_CLUSTER_NODES: cluster.nodesEnv }),
    redisTarget: redisTarget(loadEnv({ REDIS_CLUSTER_NODES: cluster.nodesEnv })),
  });
}, 120_000);
afterEach(() => {
  expect(h.slack.problems).toEqual([]);
});
afterAll(async () => {
  await h?.close();
  await cluster?.stop();
});

/** Polls `check` until it holds, for up to `ms`. */
async function until(check: () => Promise<boolean>, what: string, ms = 8000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`still not so after ${ms} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Every key in the cluster: the cluster is this test's own, so each one was written by the bot. */
const allKeys = () => keysUnder(h.redis, '');

describe('the bot on a Redis Cluster', () => {
  it('runs on the cluster through REDIS_CLUSTER_NODES, with one hash tag as its prefix', async () => {
    expect(h.redis).toBeInstanceOf(Cluster);
    expect(h.prefix).toMatch(/^\{cloudops-test-slack-[0-9a-f]{8}\}$/);
    // Ready at once; the connections to the replicas open in the background, so on a loaded machine the first
    // answers may count one node fewer (a full run saw "5 of 6" once): every node answers within seconds.
    const all = 'Redis Cluster: 6 of 6 nodes answering, 16384 of 16384 slots covered (3 masters, state ok)';
    const deadline = Date.now() + 30_000;
    let line: string | undefined;
    for (;;) {
      const ready = await fetch(`${h.baseUrl}/readyz`);
      expect(ready.status).toBe(200);
      line = ((await ready.json()) as { redisCluster?: string }).redisCluster;
      if (line === all || Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    expect(line).toBe(all);
  });

  it('create → approve → API call once → replies → audit, and the App Home lists what waits', async () => {
    await h.fillAndSubmit('resize shop-prod 102 cores=6', { reason: 'more traffic' });
    const request = await h.nextRequest();
    const message = await h.requestMessage(request.id);

    // The approver's App Home reads the involvement index written in the same script as the request.
    const seen = h.slack.homes.length;
    expect((await openHome(h, USERS.lead)).status).toBe(200);
    const home = await homeAfter(h, USERS.lead, seen);
    expect(homeButtons(home.blocks)).toContainEqual({ action: 'approve', value: request.id });

    await h.click('approve', request.id, USERS.lead, CHANNELS.prod, message);
    await h.waitForRequest(request.id, (r) => r.state === 'succeeded', 30_000);
    expect(h.sim.applied.filter((a) => a.vmid === 102)).toHaveLength(1);
    const replies = await h.slack.waitFor(() => {
      const thread = h.slack.thread(CHANNELS.prod, message.ts);
      return thread.some((m) => (m.text ?? '').startsWith(':white_check_mark: Done')) ? thread : undefined;
    }, 30_000);
    expect(replies.map((m) => m.text?.split(' ')[0])).toEqual(['Approved', ':white_check_mark:']);
    expect((await h.auditOf(request.id)).map((line) => line.split(' ')[0])).toEqual([
      'created',
      'pending',
      'approved',
      'queued',
      'sending',
      'succeeded',
    ]);
  });

  it('a reminder falls due, an unapproved request expires, a rejected one is refused', async () => {
    await h.fillAndSubmit('resize shop-prod 104 ram=4', {});
    const expiring = await h.nextRequest();
    const message = await h.requestMessage(expiring.id);
    // Its reminder waits in the due-time set, its expiry as a delayed job. The bot writes both after queueing the
    // message's post, so the message can be in Slack a moment before they are in Redis.
    await until(
      async () => (await h.redis.zrange(dueKey(h.prefix), 0, -1)).includes(`remind:${expiring.id}`),
      'the reminder in the due-time set',
    );
    expect(await h.queues.notify.getJob(`expire.${expiring.id}`)).toBeDefined();
    h.clock.advance(2 * 3_600_000 + 60_000);
    await h.waitForRequest(expiring.id, (r) => r.remindedAt !== undefined, 30_000);
    await h.slack.waitFor(
      () => h.slack.thread(CHANNELS.prod, message.ts).find((m) => (m.text ?? '').startsWith('Reminder:')),
      30_000,
    );

    h.clock.advance(23 * 3_600_000);
    await h.click('approve', expiring.id, USERS.lead, CHANNELS.prod, message);
    await h.waitForRequest(expiring.id, (r) => r.state === 'expired');
    await h.slack.waitFor(
      () =>
        h.slack.thread(CHANNELS.prod, message.ts).find((m) => (m.text ?? '').startsWith('Expired without')),
      30_000,
    );

    await h.fillAndSubmit('resize shop-prod 101 ram=8', {});
    const rejected = await h.nextRequest();
    const rejectedMessage = await h.requestMessage(rejected.id);
    const seenViews = h.slack.views.length;
    await h.click('reject', rejected.id, USERS.lead, CHANNELS.prod, rejectedMessage);
    const modal = (await h.openedView(seenViews)).view;
    await h.submitView(modal, { reject_reason: 'Not during the sale' }, USERS.lead);
    await h.waitForRequest(rejected.id, (r) => r.state === 'rejected');
    expect(await h.queues.notify.getJob(`expire.${rejected.id}`)).toBeUndefined();
    expect(h.sim.applied.filter((a) => a.vmid === 104 || a.vmid === 101)).toHaveLength(0);
  });

  it('the pricing digest is subscribed, posted and unsubscribed', async () => {
    const subscribed = await h.command('digest daily 09:00 Europe/Paris', USERS.dev, CHANNELS.staging);
    expect(subscribed.status).toBe(200);
    await h.command('digest now', USERS.dev, CHANNELS.staging);
    const digest = await h.slack.waitFor(
      () => h.slack.messages(CHANNELS.staging).find((m) => (m.text ?? '').startsWith('Pricing digest')),
      30_000,
    );
    expect(JSON.stringify(digest.blocks)).toContain('First digest in this channel');
    await h.command('digest off', USERS.dev, CHANNELS.staging);
  });

  it('every key the flow wrote carries the hash tag, so all of them sit in one slot', async () => {
    const keys = await allKeys();
    // Requests, indexes, audit, due times, deliveries, BullMQ's queues, digest state: all there.
    for (const part of [
      ':req:',
      ':audit',
      ':created',
      ':requested-by:',
      ':channel:',
      ':execute:',
      ':notify:',
    ])
      expect(
        keys.some((k) => k.includes(part)),
        part,
      ).toBe(true);
    expect(keys.filter((k) => !k.startsWith(`${h.prefix}:`))).toEqual([]);
    const slots = new Set<number>();
    for (const key of keys) slots.add(Number(await h.redis.call('CLUSTER', 'KEYSLOT', key)));
    expect(slots.size).toBe(1);
    console.info(`redis-cluster: ${keys.length} keys, all in slot ${[...slots][0]}`);
  });

  it('retention removes an ended request and its indexes after retention_days, and its audit after audit_retention_days', async () => {
    const audit = new AuditLog(h.redis, h.prefix);
    await h.fillAndSubmit('resize shop-prod 101 disk=60', {});
    const cancelled = await h.nextRequest();
    const message = await h.requestMessage(cancelled.id);
    await h.click('cancel', cancelled.id, USERS.dev, CHANNELS.prod, message);
    await h.waitForRequest(cancelled.id, (r) => r.state === 'cancelled');
    expect(await audit.read({ requestId: cancelled.id })).not.toEqual([]);

    h.clock.advance(31 * DAY);
    // Every request of the flow has ended by now: all of them go, and (audit_retention_days is 30 here too) the audit.
    await until(async () => (await h.requests()).length === 0, 'every request removed');
    await until(async () => (await h.redis.xlen(requestKeys(h.prefix).audit)) === 0, 'audit trimmed');
    expect(await audit.read({ requestId: cancelled.id })).toEqual([]);
    // Its jobs and send markers go by their own clocks (BullMQ's age, TTLs): the request and its indexes are gone.
    expect((await allKeys()).filter((k) => k.includes(':req:'))).toEqual([]);
    expect(await h.redis.zcard(requestKeys(h.prefix).created)).toBe(0);
  });
});
