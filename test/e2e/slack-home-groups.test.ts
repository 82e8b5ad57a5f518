import { describe, expect, it } from 'vitest';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { botPerFile } from '../helpers/bot-per-file.ts';
import { CHANNELS, POLICY_HEAD, PROD_UUID, PROD_VMS, USERS } from '../helpers/harness.ts';
import { clickOnHome, homeAfter, homeButtons, openHome } from '../helpers/slack-events.ts';

// App Home for approvers the request does not name by user id (issue 13): members of a Slack user group among the
// approvers, and those escalated to. The whole bot (web, worker, scheduler), the Slack stand-in answering
// usergroups.users.list, and a clock the test moves for the escalation.
const GROUPIE = 'U0GROUPIE';
const BOSS = 'U0BOSS';
const OUTSIDER = 'U0OUTSIDER';
const HOUR = 3_600_000;

const policyYaml = `
${POLICY_HEAD}
projects:
  - name: shop-prod
    uuid: ${PROD_UUID}
    cluster: zone-1
    channels: [${CHANNELS.prod}]
    approvers: [${USERS.lead}, S0LEADS]
    approvals: { count: 1, escalate_to: [${BOSS}] }
    vms:
${PROD_VMS}
`;

const h = botPerFile({
  role: 'all',
  now: new Date('2026-11-25T09:00:00Z'),
  policyYaml,
  userGroups: { S0LEADS: [GROUPIE] },
  startOptions: { duePolicy: { pollMs: 50, leaseMs: 60_000, batch: 50 } },
});

async function pending(text: string): Promise<CloudRequest> {
  const ack = await h.fillAndSubmit(text, {}, USERS.dev);
  expect(ack.json).toEqual({ response_action: 'clear' });
  return h.waitForRequest((await h.nextRequest()).id, (r) => r.state === 'pending');
}

/**
 * `user` opens their Home tab; the home published since that `holds` (a refresh rendered before the last change may
 * come first, see homeAfter).
 */
async function home(user: string, holds?: (blocks: Record<string, unknown>[]) => boolean) {
  const seen = h.slack.homes.length;
  expect((await openHome(h, user)).status).toBe(200);
  return homeAfter(h, user, seen, undefined, holds);
}

/** A home that shows approve and reject (or return and keep) for `id`: `n` buttons, 0 for none. */
const buttons = (id: string, n: number) => (blocks: Record<string, unknown>[]) =>
  buttonsFor(blocks, id).length === n;

/** A home published for `user` after `seen` publishes (of anybody) that `holds`, without them opening it again. */
async function refreshed(user: string, seen: number, holds: (text: string) => boolean) {
  try {
    return await h.slack.waitFor(
      () => h.slack.homes.slice(seen).find((p) => p.user === user && holds(JSON.stringify(p.view.blocks))),
      30_000,
    );
  } catch (error) {
    // What the refresh did meanwhile, so a failure on a loaded machine says where it stopped.
    const published = h.slack.homes.slice(seen).filter((p) => p.user === user).length;
    const queue = `${h.prefix}:home`;
    const [seenMark, pendingMark, delayed, waiting, active, limiter] = await Promise.all([
      h.redis.exists(`${h.prefix}:home-seen:${user}`),
      h.redis.pttl(`${h.prefix}:home-pending:${user}`),
      h.redis.zcard(`${queue}:delayed`),
      h.redis.llen(`${queue}:wait`),
      h.redis.llen(`${queue}:active`),
      h.redis.pttl(`${queue}:limiter`),
    ]);
    throw new Error(
      `${(error as Error).message}; ${published} publishes of ${user}'s home since, seen mark ${seenMark}, ` +
        `pending mark pttl ${pendingMark}, home jobs delayed ${delayed} waiting ${waiting} active ${active}, ` +
        `limiter pttl ${limiter}; bot warnings: ${h.logs.join('').slice(-4000)}`,
    );
  }
}

const buttonsFor = (blocks: Record<string, unknown>[], id: string) =>
  homeButtons(blocks).filter((b) => b.value === id);

describe('App Home of a user group’s member', () => {
  it('lists what waits for the group; a non-member does not see it; approving from it counts once, as in the channel', async () => {
    const request = await pending('resize shop-prod 102 cores=6');
    const member = await home(GROUPIE, buttons(request.id, 2));
    expect(buttonsFor(member.blocks, request.id)).toEqual([
      { action: 'approve', value: request.id },
      { action: 'reject', value: request.id },
    ]);
    expect(member.text).toContain('Waiting for your approval* (1, oldest first)');
    // Someone outside the group, and the escalation target before the escalation, see none of it.
    expect((await home(OUTSIDER)).text).not.toContain(request.id);
    expect((await home(BOSS)).text).not.toContain(request.id);

    const [a, b] = await Promise.all([
      clickOnHome(h, 'approve', request.id, GROUPIE),
      clickOnHome(h, 'approve', request.id, GROUPIE),
    ]);
    expect([a.status, b.status]).toEqual([200, 200]);
    const done = await h.waitForRequest(request.id, (r) => r.state === 'succeeded', 30_000);
    expect(done.approvals?.map((x) => x.user)).toEqual([GROUPIE]);
    expect(done.approvedBy).toBe(GROUPIE);
    const audit = await h.auditOf(request.id);
    expect(audit.filter((line) => line.startsWith('approved '))).toEqual([
      `approved ${GROUPIE} approval 1 of 1`,
    ]);
    expect(h.sim.calls.filter((r) => r.method === 'POST' && r.path.includes('/102/'))).toHaveLength(1);
    // Decided, it leaves the member's home.
    expect(
      (await home(GROUPIE, (blocks) => !JSON.stringify(blocks).includes(request.id))).text,
    ).not.toContain(request.id);
  });

  it('a new request reaches the open home of a group member, not of someone outside', async () => {
    await home(GROUPIE);
    const seen = h.slack.homes.length;
    const request = await pending('resize shop-prod 101 cores=3');
    const member = await refreshed(GROUPIE, seen, (text) => text.includes(request.id));
    expect(buttonsFor(member.view.blocks as Record<string, unknown>[], request.id)).toContainEqual({
      action: 'approve',
      value: request.id,
    });
    expect(
      h.slack.homes
        .slice(seen)
        .filter((p) => p.user === OUTSIDER && JSON.stringify(p.view).includes(request.id)),
    ).toEqual([]);
  });
});

describe('App Home of an escalation target', () => {
  it('shows the request once it is escalated (refreshed if open), and approving from it counts', async () => {
    const request = await pending('resize shop-prod 101 ram=8');
    expect(request.escalateTo).toEqual([BOSS]);
    const before = await home(BOSS);
    expect(before.text).not.toContain(request.id);
    const seen = h.slack.homes.length;

    // 75 % of the 24-hour TTL: the escalation; the boss's open home is published again with it.
    h.clock.advance(18 * HOUR + 60_000);
    await h.waitForRequest(request.id, (r) => r.escalatedAt !== undefined);
    const boss = await refreshed(BOSS, seen, (text) => text.includes(request.id));
    expect(buttonsFor(boss.view.blocks as Record<string, unknown>[], request.id)).toEqual([
      { action: 'approve', value: request.id },
      { action: 'reject', value: request.id },
    ]);
    expect(buttonsFor((await home(BOSS, buttons(request.id, 2))).blocks, request.id)).toHaveLength(2);

    await clickOnHome(h, 'approve', request.id, BOSS);
    const done = await h.waitForRequest(request.id, (r) => r.state === 'succeeded', 30_000);
    expect(done.approvals?.map((x) => x.user)).toEqual([BOSS]);
    expect(await h.auditOf(request.id)).toEqual(
      expect.arrayContaining(['escalation cloudops', `approved ${BOSS} approval 1 of 1`]),
    );
  });
});

describe('requests stored before the App Home indexes', () => {
  it('are on the homes of those they name after the next start (a one-off backfill)', async () => {
    const request = await pending('resize shop-prod 102 ram=16');
    // As a store written before the indexes: none for this request, and no backfill marked done.
    for (const id of [USERS.dev, USERS.lead, 'S0LEADS', BOSS])
      await h.redis.zrem(`${h.prefix}:involving:${id}`, request.id);
    await h.redis.zrem(`${h.prefix}:requested-by:${USERS.dev}`, request.id);
    await h.redis.del(`${h.prefix}:index-backfill:home-v1`);
    const without = (blocks: Record<string, unknown>[]) => !JSON.stringify(blocks).includes(request.id);
    expect((await home(GROUPIE, without)).text).not.toContain(request.id);
    expect((await home(USERS.dev, without)).text).not.toContain(request.id);

    await h.restart();
    await expect
      .poll(() => h.redis.hget(`${h.prefix}:index-backfill:home-v1`, 'done'), { timeout: 30_000 })
      .toBe('1');
    expect(buttonsFor((await home(GROUPIE, buttons(request.id, 2))).blocks, request.id)).toHaveLength(2);
    expect(buttonsFor((await home(USERS.lead, buttons(request.id, 2))).blocks, request.id)).toHaveLength(2);
    expect((await home(USERS.dev, (blocks) => JSON.stringify(blocks).includes(request.id))).text).toContain(
      request.id,
    );
  });
});

describe('a group member’s App Home with a lease and a request to approve', () => {
  it('lists the group’s waiting request and the open lease of the group’s project, whose Keep acts as in the thread', async () => {
    const ack = await h.fillAndSubmit('resize shop-prod 101 cores=4 for=48h', {}, USERS.dev);
    expect(ack.json).toEqual({ response_action: 'clear' });
    const created = await h.nextRequest();
    await clickOnHome(h, 'approve', created.id, USERS.lead);
    const leased = await h.waitForRequest(created.id, (r) => r.leaseOpen === true, 30_000);
    const waiting = await pending('resize shop-prod 102 cores=8');

    const member = await home(
      GROUPIE,
      (blocks) => buttons(waiting.id, 2)(blocks) && buttons(leased.id, 2)(blocks),
    );
    const texts = member.blocks
      .map((b) => (b.text as { text?: string } | undefined)?.text)
      .filter((t): t is string => t !== undefined);
    console.info(`App Home of a group member as it renders (section texts):\n${texts.join('\n---\n')}`);
    expect(buttonsFor(member.blocks, waiting.id)).toEqual([
      { action: 'approve', value: waiting.id },
      { action: 'reject', value: waiting.id },
    ]);
    expect(buttonsFor(member.blocks, leased.id)).toEqual([
      { action: 'lease_return', value: leased.id },
      { action: 'lease_keep', value: leased.id },
    ]);
    expect((await home(OUTSIDER)).text).not.toContain(leased.id);

    const seen = h.slack.views.length;
    await clickOnHome(h, 'lease_keep', leased.id, GROUPIE);
    const modal = (await h.openedView(seen)).view;
    expect(modal.callback_id).toBe('lease_keep');
    await h.submitView(modal, { keep_reason: 'still needed' }, GROUPIE);
    const kept = await h.waitForRequest(leased.id, (r) => r.leaseOpen === false);
    expect(kept.lease?.kept).toMatchObject({ by: GROUPIE, reason: 'still needed' });
    expect(buttonsFor((await home(GROUPIE, buttons(leased.id, 0))).blocks, leased.id)).toEqual([]);
  });
});
