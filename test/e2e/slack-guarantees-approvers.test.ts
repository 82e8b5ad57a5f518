import { describe, expect, it } from 'vitest';
import { DEFAULT_SEED, type SimSeed } from '../../sim/cloud/server.ts';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { botPerFile } from '../helpers/bot-per-file.ts';
import { TEAM, USERS } from '../helpers/harness.ts';
import { homeAfter, homeButtons, openHome } from '../helpers/slack-events.ts';

// Guarantees of "who may approve" that once held with no test to notice a change (issue 24): a user group Slack
// will not resolve grants nobody, a group Slack stops resolving loses its members, and an approver whose approval
// is counted is no longer asked for it on their App Home. The whole bot over signed HTTP, the Slack stand-in
// answering usergroups.users.list, every click asking Slack again (no cache), as after the cache's minutes.
const GROUPIE = 'U0GROUPIE';
const STRANGER = USERS.dev2;
const UNRESOLVED = { uuid: '6b000000-0000-4000-8000-000000000401', channel: 'C0UNRESOLVED' };
const REFUSED = { uuid: '6b000000-0000-4000-8000-000000000402', channel: 'C0REFUSED' };
const TWO = { uuid: '6b000000-0000-4000-8000-000000000403', channel: 'C0TWO' };

const vm = (vmid: number) => ({
  vmid,
  power: 'running' as const,
  cores: 2,
  ramGb: 4,
  osDiskGb: 50,
  cpuClass: 'regular',
  wanMode: 'ipv4' as const,
  createdHoursAgo: 24 * 30,
});

const SEED: SimSeed = {
  clusters: DEFAULT_SEED.clusters,
  projects: [
    { uuid: UNRESOLVED.uuid, name: 'unresolved', vms: [vm(401)] },
    { uuid: REFUSED.uuid, name: 'refused', vms: [vm(402)] },
    { uuid: TWO.uuid, name: 'two', vms: [vm(403)] },
  ],
};

const facts = (vmid: number) =>
  `{ vmid: ${vmid}, cores: 2, ram_gb: 4, os_disk_gb: 50, cpu_class: regular, wan_mode: ipv4 }`;

const POLICY = `
workspace: ${TEAM}
currency: EUR
approvers: [${USERS.admin}]
projects:
  - name: unresolved
    uuid: ${UNRESOLVED.uuid}
    cluster: zone-1
    channels: [${UNRESOLVED.channel}]
    approvers: [${USERS.lead}, S0GONE]
    vms: [${facts(401)}]
  - name: refused
    uuid: ${REFUSED.uuid}
    cluster: zone-1
    channels: [${REFUSED.channel}]
    approvers: [${USERS.lead}, S0LEADS]
    vms: [${facts(402)}]
  - name: two
    uuid: ${TWO.uuid}
    cluster: zone-1
    channels: [${TWO.channel}]
    approvers: [${USERS.lead}, ${USERS.lead2}]
    approvals: { count: 2 }
    vms: [${facts(403)}]
`;

const h = botPerFile({
  role: 'all',
  policyYaml: POLICY,
  simSeed: SEED,
  userGroups: { S0GONE: { error: 'no_such_subteam' }, S0LEADS: [GROUPIE] },
  startOptions: { userGroupCache: { cacheMs: 0, refreshGapMs: 0 } },
});

/** `text` asked for by the developer in `channel`, once it waits for approval. */
async function pending(text: string, channel: string): Promise<CloudRequest> {
  const ack = await h.fillAndSubmit(text, {}, USERS.dev, channel);
  expect(ack.json).toEqual({ response_action: 'clear' });
  return h.waitForRequest((await h.nextRequest(channel)).id, (r) => r.state === 'pending');
}

/** `user` clicks Approve on the request's message in `channel`. */
async function approve(request: CloudRequest, user: string, channel: string): Promise<void> {
  await h.click('approve', request.id, user, channel, await h.requestMessage(request.id));
}

/** `user` clicks Approve and is refused: the ephemeral answer they got. */
async function refusedApproval(request: CloudRequest, user: string, channel: string): Promise<string> {
  const seen = h.slack.ephemerals(channel, user).length;
  await approve(request, user, channel);
  await h.slack.waitFor(() => h.slack.ephemerals(channel, user).length > seen);
  return h.slack.ephemerals(channel, user).at(-1)?.text ?? '';
}

const groupLookups = (group: string) =>
  h.slack.callsOf('usergroups.users.list').filter((c) => c.args.usergroup === group).length;

/** Lets anything a click set going (a count, a job) happen. */
const settle = () => new Promise((r) => setTimeout(r, 400));

describe('a user group Slack will not resolve', () => {
  it('lets nobody approve through it: a stranger is refused and nothing is counted', async () => {
    const request = await pending('resize unresolved 401 cores=4', UNRESOLVED.channel);
    const asked = groupLookups('S0GONE');
    expect(await refusedApproval(request, STRANGER, UNRESOLVED.channel)).toBe(
      `Only the approvers of unresolved can approve: <@${USERS.lead}>, <!subteam^S0GONE>.`,
    );
    // Slack was asked about the group for the click, and refused it.
    expect(groupLookups('S0GONE')).toBeGreaterThan(asked);
    await settle();
    const after = await h.store.get(request.id);
    expect(after).toMatchObject({ state: 'pending', approvals: [] });
    expect(h.sim.applied.filter((a) => a.vmid === 401)).toEqual([]);
    // The listed user still approves.
    await approve(request, USERS.lead, UNRESOLVED.channel);
    await h.waitForRequest(request.id, (r) => r.state === 'succeeded', 30_000);
  });
});

describe('a user group Slack stops resolving', () => {
  it('loses the members it had: one who approved before is refused now', async () => {
    const before = await pending('resize refused 402 cores=3', REFUSED.channel);
    await approve(before, GROUPIE, REFUSED.channel);
    await h.waitForRequest(before.id, (r) => r.state === 'succeeded', 30_000);

    // The group is deleted (or the bot lost the scope to read it): Slack refuses it from now on.
    h.slack.setUserGroup('S0LEADS', { error: 'no_such_subteam' });
    const after = await pending('resize refused 402 cores=4', REFUSED.channel);
    const asked = groupLookups('S0LEADS');
    expect(await refusedApproval(after, GROUPIE, REFUSED.channel)).toBe(
      `Only the approvers of refused can approve: <@${USERS.lead}>, <!subteam^S0LEADS>.`,
    );
    expect(groupLookups('S0LEADS')).toBeGreaterThan(asked);
    await settle();
    expect(await h.store.get(after.id)).toMatchObject({ state: 'pending', approvals: [] });
    expect(h.sim.applied.filter((a) => a.vmid === 402)).toHaveLength(1);
  });
});

describe('an approver whose approval is counted (1 of 2)', () => {
  /** `user` opens their Home tab; the home published for it. */
  async function home(user: string) {
    const seen = h.slack.homes.length;
    expect((await openHome(h, user)).status).toBe(200);
    return homeAfter(h, user, seen);
  }

  it('is no longer asked on their App Home; the other approver still is', async () => {
    const request = await pending('resize two 403 cores=4', TWO.channel);
    const buttonsFor = (blocks: Record<string, unknown>[]) =>
      homeButtons(blocks).filter((b) => b.value === request.id);
    expect(buttonsFor((await home(USERS.lead)).blocks)).toEqual([
      { action: 'approve', value: request.id },
      { action: 'reject', value: request.id },
    ]);

    await approve(request, USERS.lead, TWO.channel);
    await h.waitForRequest(request.id, (r) => (r.approvals ?? []).length === 1);
    const lead = await home(USERS.lead);
    expect(buttonsFor(lead.blocks)).toEqual([]);
    expect(lead.text).not.toContain(request.id);
    const lead2 = await home(USERS.lead2);
    expect(buttonsFor(lead2.blocks)).toEqual([
      { action: 'approve', value: request.id },
      { action: 'reject', value: request.id },
    ]);
    expect((await h.store.get(request.id))?.state).toBe('pending');
  });
});
