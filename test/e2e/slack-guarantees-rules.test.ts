import { describe, expect, it } from 'vitest';
import { DEFAULT_SEED, type SimSeed } from '../../sim/cloud/server.ts';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { botPerFile } from '../helpers/bot-per-file.ts';
import { TEAM, USERS } from '../helpers/harness.ts';

// Guarantees of the approval rules that once held with no test to notice a change (issue 24): which way a resize
// goes, the sign of its monthly cost difference, and a freeze that covers the time a scheduled downsize runs.
// The whole bot (web, worker, scheduler) over signed HTTP, the cloud sim, and a clock the test moves.
const START = new Date('2026-11-25T09:00:00Z');
const HOUR = 3_600_000;
const MIXED = { uuid: '6a000000-0000-4000-8000-000000000301', channel: 'C0MIXED' };
const CHEAP = { uuid: '6a000000-0000-4000-8000-000000000302', channel: 'C0CHEAP' };
const HELD = { uuid: '6a000000-0000-4000-8000-000000000303', channel: 'C0HELD' };
const HELD_NOW = { uuid: '6a000000-0000-4000-8000-000000000304', channel: 'C0HELDNOW' };

/** A freeze from 21 h to 30 h after START: a downsize of a VM made 2 h before START may run from about 22 h. */
const FREEZE_FROM = new Date(START.getTime() + 21 * HOUR);
const FREEZE_TO = new Date(START.getTime() + 30 * HOUR);
const wall = (date: Date) => date.toISOString().slice(0, 16);

const vm = (vmid: number, createdHoursAgo: number) => ({
  vmid,
  power: 'stopped' as const,
  cores: 4,
  ramGb: 8,
  osDiskGb: 50,
  cpuClass: 'regular',
  wanMode: 'ipv4' as const,
  createdHoursAgo,
});

const SEED: SimSeed = {
  clusters: DEFAULT_SEED.clusters,
  projects: [
    { uuid: MIXED.uuid, name: 'mixed', vms: [vm(301, 24 * 30)] },
    { uuid: CHEAP.uuid, name: 'cheap', vms: [vm(302, 24 * 30)] },
    { uuid: HELD.uuid, name: 'held', vms: [vm(303, 2)] },
    { uuid: HELD_NOW.uuid, name: 'held-now', vms: [vm(304, 2)] },
  ],
};

function policyYaml(start: Date): string {
  const twoHoursAgo = new Date(start.getTime() - 2 * HOUR).toISOString();
  const facts = (vmid: number, createdAt?: string) =>
    `{ vmid: ${vmid}, cores: 4, ram_gb: 8, os_disk_gb: 50, cpu_class: regular, wan_mode: ipv4${createdAt ? `, created_at: '${createdAt}'` : ''} }`;
  const freeze = `[{ from: "${wall(FREEZE_FROM)}", to: "${wall(FREEZE_TO)}", tz: UTC, reason: data centre move }]`;
  return `
workspace: ${TEAM}
currency: EUR
approvers: [${USERS.admin}]
approval_ttl_hours: 48
projects:
  - name: mixed
    uuid: ${MIXED.uuid}
    cluster: zone-1
    channels: [${MIXED.channel}]
    approvers: [${USERS.lead}]
    approvals: { count: 1, rules: [{ when: { kind: resize_up }, count: 0 }] }
    vms: [${facts(301)}]
  - name: cheap
    uuid: ${CHEAP.uuid}
    cluster: zone-1
    channels: [${CHEAP.channel}]
    approvers: [${USERS.lead}]
    approvals: { count: 1, rules: [{ when: { monthly_delta_under: 5 }, count: 0 }] }
    vms: [${facts(302)}]
  - name: held
    uuid: ${HELD.uuid}
    cluster: zone-1
    channels: [${HELD.channel}]
    approvers: [${USERS.lead}]
    freeze: ${freeze}
    vms: [${facts(303, twoHoursAgo)}]
  - name: held-now
    uuid: ${HELD_NOW.uuid}
    cluster: zone-1
    channels: [${HELD_NOW.channel}]
    approvers: [${USERS.lead}]
    approval: { resize_up: required, resize_down: none, restore: required }
    freeze: ${freeze}
    vms: [${facts(304, twoHoursAgo)}]
`;
}

const h = botPerFile({
  role: 'all',
  now: START,
  policyYaml,
  simSeed: SEED,
  startOptions: { duePolicy: { pollMs: 50, leaseMs: 60_000, batch: 50 } },
});

/** `text` asked for by the developer in `channel` (the VM confirmed stopped), as stored once its message is up. */
async function asked(text: string, channel: string): Promise<CloudRequest> {
  const ack = await h.fillAndSubmit(text, { confirm: ['stopped'] }, USERS.dev, channel);
  expect(ack.json).toEqual({ response_action: 'clear' });
  return h.nextRequest(channel);
}

const resizesOf = (vmid: number) => h.sim.applied.filter((a) => a.vmid === vmid && a.route === 'resize');
/** Lets the due-times loop (50 ms) look a few times at the moved clock. */
const settle = () => new Promise((r) => setTimeout(r, 400));

describe('which way a resize goes', () => {
  it('cores down with disk up is a decrease: a count-0 rule for increases does not run it at once', async () => {
    const mixed = await asked('resize mixed 301 cores=2 disk=60', MIXED.channel);
    expect(mixed).toMatchObject({ state: 'pending', requiredApprovals: 1, approvalRule: 'the default' });
    expect(await h.auditOf(mixed.id)).toContain(`created ${USERS.dev} the default: 1 approval`);
    await settle();
    expect((await h.store.get(mixed.id))?.state).toBe('pending');
    expect(resizesOf(301)).toEqual([]);

    // The same rule does run a pure increase at once: the rule itself works.
    const up = await asked('resize mixed 301 cores=6 disk=60', MIXED.channel);
    expect(up).toMatchObject({ requiredApprovals: 0, approvalRule: 'rule 1 (kind resize_up)' });
    await h.waitForRequest(up.id, (r) => r.state === 'succeeded', 30_000);
    expect(resizesOf(301).map((a) => a.body)).toEqual([{ cores: 6, os_disk_gb: 60 }]);
  });
});

describe('the sign of the monthly cost difference', () => {
  it('a large increase costs more (a positive difference): a monthly_delta_under count-0 rule leaves it to an approver', async () => {
    // 12 more cores at 0.0120 an hour in zone-1, 730 hours a month: 105.12 more.
    const up = await asked('resize cheap 302 cores=16', CHEAP.channel);
    expect(up.cost?.diffMonthly).toBe('105.12');
    expect(up).toMatchObject({ state: 'pending', requiredApprovals: 1, approvalRule: 'the default' });
    await settle();
    expect(resizesOf(302)).toEqual([]);

    // 2 cores fewer: 17.52 less, under 5, so the rule runs it at once.
    const down = await asked('resize cheap 302 cores=2', CHEAP.channel);
    expect(down.cost?.diffMonthly).toBe('-17.52');
    expect(down).toMatchObject({
      requiredApprovals: 0,
      approvalRule: 'rule 1 (monthly cost difference under 5 EUR)',
    });
    await h.waitForRequest(down.id, (r) => r.state === 'succeeded', 30_000);
    expect(resizesOf(302).map((a) => a.body)).toEqual([{ cores: 2 }]);
  });
});

describe('a scheduled downsize whose run time falls inside a freeze', () => {
  /** Lowers `vmid` (made 2 h ago) in `channel`: refused by the 24-hour rule, so scheduled for its earliest time. */
  async function scheduled(project: string, vmid: number, channel: string): Promise<CloudRequest> {
    const ack = await h.fillAndSubmit(
      `resize ${project} ${vmid} cores=2`,
      { confirm: ['stopped'] },
      USERS.dev,
      channel,
    );
    expect(ack.json?.response_action).toBe('push');
    const pushed = ack.json?.view as Record<string, unknown>;
    expect((await h.submitView(pushed, {}, USERS.dev)).json).toEqual({ response_action: 'clear' });
    const request = await h.nextRequest(channel);
    const runAt = new Date(request.runAt ?? 0);
    expect(runAt > FREEZE_FROM && runAt < FREEZE_TO).toBe(true);
    return request;
  }

  /** Moves the clock past the run time, then past the freeze: nothing runs in between; then it runs, once. */
  async function heldUntilTheFreezeEnds(request: CloudRequest, vmid: number): Promise<void> {
    h.clock.set(new Date(new Date(request.runAt ?? 0).getTime() + 10 * 60_000));
    await settle();
    expect((await h.store.get(request.id))?.state).toBe('frozen');
    expect(resizesOf(vmid)).toEqual([]);
    h.clock.set(new Date(FREEZE_TO.getTime() + 60_000));
    await h.waitForRequest(request.id, (r) => r.state === 'succeeded', 30_000);
    expect(resizesOf(vmid).map((a) => a.body)).toEqual([{ cores: 2 }]);
    expect(new Date(resizesOf(vmid)[0]?.at ?? 0).getTime()).toBeGreaterThanOrEqual(FREEZE_TO.getTime());
  }

  it('approved before the freeze starts, it is held for the freeze that covers its run time, then runs after it', async () => {
    h.clock.set(START);
    const request = await scheduled('held', 303, HELD.channel);
    await h.click('approve', request.id, USERS.lead, HELD.channel, await h.requestMessage(request.id));
    // The approval is stored first ('approved'), then the freeze holds it: the state after both is the one to read.
    const frozen = await h.waitForRequest(request.id, (r) => r.state !== 'pending' && r.state !== 'approved');
    expect(frozen).toMatchObject({ state: 'frozen', frozenUntil: FREEZE_TO.toISOString() });
    expect(await h.queues.execute.getJob(request.id)).toBeUndefined();
    await heldUntilTheFreezeEnds(request, 303);
  });

  it('needing no approval, it is held the same way (not only a request that waits for an approver)', async () => {
    h.clock.set(START);
    const request = await scheduled('held-now', 304, HELD_NOW.channel);
    const frozen = await h.waitForRequest(request.id, (r) => r.state !== 'pending');
    expect(frozen).toMatchObject({ state: 'frozen', frozenUntil: FREEZE_TO.toISOString() });
    expect(await h.queues.execute.getJob(request.id)).toBeUndefined();
    await heldUntilTheFreezeEnds(request, 304);
  });
});
