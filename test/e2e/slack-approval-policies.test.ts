import { describe, expect, it } from 'vitest';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { botPerFile } from '../helpers/bot-per-file.ts';
import { CHANNELS, POLICY_HEAD, PROD_UUID, PROD_VMS, STAGING_UUID, USERS } from '../helpers/harness.ts';

// Approval policies end to end (issue 11): signed HTTP into the whole bot (web, worker, scheduler), the Slack
// stand-in answering usergroups.users.list, the cloud sim running what is approved, and a clock the test moves.
const GROUPIE = 'U0GROUPIE';
const NEWBIE = 'U0NEWBIE';
const BOSS = 'U0BOSS';
const CTO = 'U0CTO';
const HOUR = 3_600_000;

/** "2026-11-25T09:00" in UTC, as the policy writes local times. */
const wall = (date: Date) => date.toISOString().slice(0, 16);

function policyYaml(start: Date): string {
  return `
${POLICY_HEAD}
projects:
  - name: shop-prod
    uuid: ${PROD_UUID}
    cluster: zone-1
    channels: [${CHANNELS.prod}]
    approvers: [${USERS.lead}, S0LEADS]
    approvals:
      count: 1
      rules:
        - { name: more cores, when: { kind: resize_up, change: cores }, count: 2 }
        - { when: { change: disk }, count: 0 }
      remind_after_hours: 2
      escalate_to: [${BOSS}]
    vms:
${PROD_VMS}
  - name: shop-staging
    uuid: ${STAGING_UUID}
    cluster: zone-2
    channels: [${CHANNELS.staging}]
    approvers: [${USERS.lead}]
    approvals: { count: 1, rules: [{ when: { change: disk }, count: 0 }] }
    freeze:
      - { from: "${wall(new Date(start.getTime() - HOUR))}", to: "${wall(new Date(start.getTime() + 3 * HOUR))}", tz: UTC, reason: release week }
    break_glass: [${CTO}]
    vms:
      - { vmid: 201, name: staging-1, cores: 1, ram_gb: 2, os_disk_gb: 20, cpu_class: light, wan_mode: ipv6 }
  - name: shop-tight
    uuid: 5d0c1f2e-0000-4000-8000-000000000301
    channels: [${CHANNELS.random}]
    approvers: [${USERS.lead}, S0NOBODY]
    approvals: { count: 2 }
    vms:
      - { vmid: 301, cores: 1, ram_gb: 2, os_disk_gb: 20 }
`;
}

const h = botPerFile({
  role: 'all',
  now: new Date('2026-11-25T09:00:00Z'),
  policyYaml,
  userGroups: { S0LEADS: [GROUPIE] },
  startOptions: {
    duePolicy: { pollMs: 50, leaseMs: 60_000, batch: 50 },
    userGroupCache: { cacheMs: 300_000, refreshGapMs: 0 },
  },
});

async function request(text: string, channel: string = CHANNELS.prod, user: string = USERS.dev) {
  const ack = await h.fillAndSubmit(text, {}, user, channel);
  expect(ack.json).toEqual({ response_action: 'clear' });
  return h.nextRequest(channel);
}

/** The texts of the ephemerals `user` got in `channel`, once there are more than `seen`. */
async function ephemeralsAfter(channel: string, user: string, seen: number): Promise<string[]> {
  await h.slack.waitFor(() => h.slack.ephemerals(channel, user).length > seen);
  return h.slack.ephemerals(channel, user).map((m) => m.text ?? '');
}

/** The request message's context line (who acted, the progress) as it stands. */
function contextOf(message: { blocks?: unknown[] }): string {
  const blocks = (message.blocks ?? []) as { type: string; elements?: { text?: string }[] }[];
  return blocks
    .filter((b) => b.type === 'context')
    .flatMap((b) => b.elements ?? [])
    .map((e) => e.text ?? '')
    .join('\n');
}

async function threadTexts(requestId: string, count: number): Promise<string[]> {
  const message = await h.requestMessage(requestId);
  await h.slack.waitFor(() => h.slack.thread(message.ts ? CHANNELS.prod : '', message.ts).length >= count);
  return h.slack.thread(CHANNELS.prod, message.ts).map((m) => m.text ?? '');
}

describe('two of two, with a group member as the second', () => {
  it('shows "1 of 2 approvals" and who may still approve, then runs once the group member approves', async () => {
    const created = await request('resize shop-prod 102 cores=6');
    expect(created).toMatchObject({ requiredApprovals: 2, approvalRule: 'rule 1 (more cores)' });
    await h.waitForRequest(created.id, (r) => r.state === 'pending');
    await h.click('approve', created.id, USERS.lead);
    const one = await h.waitForRequest(created.id, (r) => (r.approvals ?? []).length === 1);
    expect(one.state).toBe('pending');
    const message = await h.requestMessage(created.id, (m) => contextOf(m).includes('1 of 2 approvals'));
    const context = contextOf(message);
    // As it renders (the closing note of issue 11 quotes it).
    console.info(`request message context: ${context}`);
    expect(context).toContain(
      `*1 of 2 approvals*: <@${USERS.lead}> (2 approvals needed by rule 1 (more cores))`,
    );
    expect(context).toContain('May still approve: <!subteam^S0LEADS>');
    expect(context).not.toContain(`May still approve: <@${USERS.lead}>`);

    // The same approver again changes nothing; the group member's click completes it.
    const seen = h.slack.ephemerals(CHANNELS.prod, USERS.lead).length;
    await h.click('approve', created.id, USERS.lead);
    expect((await ephemeralsAfter(CHANNELS.prod, USERS.lead, seen)).at(-1)).toBe(
      'Your approval is already counted: another approver has to add theirs.',
    );
    const lookups = h.slack.callsOf('usergroups.users.list').length;
    await h.click('approve', created.id, GROUPIE);
    const done = await h.waitForRequest(created.id, (r) => r.state === 'succeeded', 30_000);
    expect(done.approvals?.map((a) => a.user)).toEqual([USERS.lead, GROUPIE]);
    // The member was in the cache: no call to Slack for their click.
    expect(h.slack.callsOf('usergroups.users.list').length).toBe(lookups);
    expect(h.sim.calls.filter((r) => r.method === 'POST' && r.path.includes('/102/'))).toHaveLength(1);
    expect(await h.auditOf(created.id)).toEqual(
      expect.arrayContaining([
        `created ${USERS.dev} rule 1 (more cores): 2 approvals`,
        `approval ${USERS.lead} approval 1 of 2`,
        `approved ${GROUPIE} approval 2 of 2`,
      ]),
    );
    const thread = await threadTexts(created.id, 1);
    expect(thread[0]).toBe(`Approved by <@${USERS.lead}> and <@${GROUPIE}>. Queued to run now.`);
  });

  it('a click by someone the cache does not list refreshes the group once: a new member counts, a stranger does not', async () => {
    const created = await request('resize shop-prod 101 cores=3');
    h.slack.setUserGroup('S0LEADS', [GROUPIE, NEWBIE]);
    const before = h.slack.callsOf('usergroups.users.list').length;
    await h.click('approve', created.id, NEWBIE);
    await h.waitForRequest(created.id, (r) => (r.approvals ?? []).length === 1);
    expect(h.slack.callsOf('usergroups.users.list').length).toBe(before + 1);
    const seen = h.slack.ephemerals(CHANNELS.prod, USERS.dev2).length;
    await h.click('approve', created.id, USERS.dev2);
    expect((await ephemeralsAfter(CHANNELS.prod, USERS.dev2, seen)).at(-1)).toBe(
      `Only the approvers of shop-prod can approve: <@${USERS.lead}>, <!subteam^S0LEADS>.`,
    );
    expect(h.slack.callsOf('usergroups.users.list').length).toBe(before + 2);
    // One reject ends it, whatever approvals it had.
    const views = h.slack.views.length;
    await h.click('reject', created.id, GROUPIE);
    const modal = (await h.openedView(views)).view;
    await h.submitView(modal, { reject_reason: 'not now' }, GROUPIE);
    await h.waitForRequest(created.id, (r) => r.state === 'rejected');
  });
});

describe('count 0 and counts nobody can reach', () => {
  it('a count: 0 rule runs at once, the rule named on the message', async () => {
    const ack = await h.fillAndSubmit('resize shop-prod 102 disk=120', {});
    expect(ack.json).toEqual({ response_action: 'clear' });
    const created = await h.nextRequest();
    expect(created.requiredApprovals).toBe(0);
    await h.waitForRequest(created.id, (r) => r.state === 'succeeded', 30_000);
    const message = await h.requestMessage(created.id);
    expect(contextOf(message)).toContain('Needs no approval by rule 2 (changes disk)');
    expect(await h.auditOf(created.id)).toContain(`created ${USERS.dev} rule 2 (changes disk): no approval`);
  });

  it('a request whose count cannot be reached is refused when made, with the reason; the unresolvable group was warned about', async () => {
    const seen = h.slack.ephemerals(CHANNELS.random, USERS.dev).length;
    const ack = await h.fillAndSubmit('resize shop-tight 301 cores=2', {}, USERS.dev, CHANNELS.random);
    expect(ack.json).toEqual({ response_action: 'clear' });
    expect((await ephemeralsAfter(CHANNELS.random, USERS.dev, seen)).at(-1)).toBe(
      ':no_entry: Not requested: it needs 2 approvals from distinct people other than the requester, and only 1 may approve in shop-tight (user group S0NOBODY could not be resolved) (the default).',
    );
    expect(await h.requests(CHANNELS.random)).toEqual([]);
    expect(h.logs.some((l) => l.includes('S0NOBODY') && l.includes('grants nobody'))).toBe(true);
  });
});

describe('a freeze', () => {
  let held: CloudRequest;

  it('holds approved work: the state and the message say until when; break glass runs it now with a reason', async () => {
    const first = await request('resize shop-staging 201 cores=2', CHANNELS.staging);
    await h.click('approve', first.id, USERS.lead, CHANNELS.staging);
    const frozen = await h.waitForRequest(first.id, (r) => r.state === 'frozen');
    expect(frozen.frozenUntil).toBe('2026-11-25T12:00:00.000Z');
    const message = await h.requestMessage(first.id, (m) => JSON.stringify(m.blocks).includes(':snowflake:'));
    expect(JSON.stringify(message.blocks)).toContain('A freeze holds shop-staging (release week) until');

    // Someone who is not a break-glass user is told who is.
    const seen = h.slack.ephemerals(CHANNELS.staging, USERS.lead).length;
    await h.click('break_glass', first.id, USERS.lead, CHANNELS.staging);
    expect((await ephemeralsAfter(CHANNELS.staging, USERS.lead, seen)).at(-1)).toBe(
      `Only <@${CTO}> may run work during a freeze of shop-staging; it runs by itself when the freeze ends.`,
    );
    const views = h.slack.views.length;
    await h.click('break_glass', first.id, CTO, CHANNELS.staging);
    const modal = (await h.openedView(views)).view;
    expect(await h.submitView(modal, {}, CTO)).toMatchObject({ json: { response_action: 'errors' } });
    expect((await h.submitView(modal, { break_glass_reason: 'hotfix for the outage' }, CTO)).json).toEqual({
      response_action: 'clear',
    });
    const ran = await h.waitForRequest(first.id, (r) => r.state === 'succeeded', 30_000);
    expect(ran.breakGlass).toMatchObject({ by: CTO, reason: 'hotfix for the outage' });
    expect(await h.auditOf(first.id)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /^frozen cloudops held by a freeze \(release week\) until 2026-11-25T12:00:00.000Z$/,
        ),
        `queued ${CTO} break glass: hotfix for the outage`,
      ]),
    );
  });

  it('holds approved work until the window ends, then runs it (moved clock); a held request can be cancelled', async () => {
    // Work that needs no approval is held too, from the moment it is made.
    const noApproval = await request('resize shop-staging 201 disk=30', CHANNELS.staging);
    expect(noApproval.requiredApprovals).toBe(0);
    await h.waitForRequest(noApproval.id, (r) => r.state === 'frozen');
    // (Cancelled, so that it does not undo the held increase's size: both were prefilled with the VM's sizes.)
    await h.click('cancel', noApproval.id, USERS.dev, CHANNELS.staging);
    await h.waitForRequest(noApproval.id, (r) => r.state === 'cancelled');
    held = await request('resize shop-staging 201 cores=3', CHANNELS.staging);
    await h.click('approve', held.id, USERS.lead, CHANNELS.staging);
    await h.waitForRequest(held.id, (r) => r.state === 'frozen');
    const cancelled = await request('resize shop-staging 201 ram=4', CHANNELS.staging);
    await h.click('approve', cancelled.id, USERS.lead, CHANNELS.staging);
    await h.waitForRequest(cancelled.id, (r) => r.state === 'frozen');
    await h.click('cancel', cancelled.id, USERS.dev, CHANNELS.staging);
    await h.waitForRequest(cancelled.id, (r) => r.state === 'cancelled');

    h.clock.advance(2 * HOUR);
    // Still inside the window: nothing moves.
    await new Promise((r) => setTimeout(r, 300));
    expect((await h.store.get(held.id))?.state).toBe('frozen');
    h.clock.advance(HOUR + 60_000);
    const ran = await h.waitForRequest(held.id, (r) => r.state === 'succeeded', 30_000);
    expect(ran.breakGlass).toBeUndefined();
    expect(await h.auditOf(held.id)).toContain(
      'queued cloudops the freeze ended: queued, the rules are checked again when it runs',
    );
    expect((await h.store.get(cancelled.id))?.state).toBe('cancelled');
    // Break glass and the held increase: two calls, the cancelled ones never sent.
    expect(h.sim.calls.filter((r) => r.method === 'POST' && r.path.includes('/201/'))).toHaveLength(2);
  });
});

describe('reminder and escalation', () => {
  it('one reminder after remind_after_hours mentions who has not acted; at 75 % of the TTL escalate_to may approve', async () => {
    const created = await request('resize shop-prod 101 cores=4');
    await h.click('approve', created.id, GROUPIE);
    await h.waitForRequest(created.id, (r) => (r.approvals ?? []).length === 1);
    h.clock.advance(2 * HOUR + 60_000);
    const reminded = await h.waitForRequest(created.id, (r) => r.remindedAt !== undefined);
    const message = await h.requestMessage(created.id);
    await h.slack.waitFor(() => h.slack.thread(CHANNELS.prod, message.ts).length >= 1);
    const reminder = h.slack.thread(CHANNELS.prod, message.ts).map((m) => m.text ?? '');
    expect(reminder[0]).toMatch(
      new RegExp(
        `^Reminder: this request still needs 1 approval from <@${USERS.lead}> and <!subteam\\^S0LEADS>\\. It expires `,
      ),
    );
    expect(reminded.state).toBe('pending');

    // Before the escalation the boss may not approve.
    const seen = h.slack.ephemerals(CHANNELS.prod, BOSS).length;
    await h.click('approve', created.id, BOSS);
    expect((await ephemeralsAfter(CHANNELS.prod, BOSS, seen)).at(-1)).toContain(
      'Only the approvers of shop-prod',
    );

    h.clock.advance(16 * HOUR);
    await h.waitForRequest(created.id, (r) => r.escalatedAt !== undefined);
    await h.slack.waitFor(() => h.slack.thread(CHANNELS.prod, message.ts).length >= 2);
    expect(h.slack.thread(CHANNELS.prod, message.ts)[1]?.text).toMatch(
      new RegExp(
        `^Escalated: nobody has decided yet and this request expires .*<@${BOSS}> may approve it now\\.$`,
      ),
    );
    await h.click('approve', created.id, BOSS);
    const done = await h.waitForRequest(created.id, (r) => r.state === 'succeeded', 30_000);
    expect(done.approvals?.map((a) => a.user)).toEqual([GROUPIE, BOSS]);
    // Each fell due once: one reminder, one escalation.
    const audit = await h.auditOf(created.id);
    expect(audit.filter((a) => a.startsWith('reminder '))).toHaveLength(1);
    expect(audit.filter((a) => a.startsWith('escalation '))).toHaveLength(1);
  });
});
