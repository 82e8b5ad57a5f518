/**
 * What the pictures show: the bot's own Block Kit builders called with one example deployment's data (the
 * example policy's project, VM and people). Nothing here draws; render.ts does.
 */
import type { Inbox } from '../../src/requests/inbox.ts';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { homeView } from '../../src/slack/blocks/home.ts';
import { resizeModal } from '../../src/slack/blocks/modals.ts';
import { createRequestRenderer } from '../../src/slack/blocks/request-message.ts';

/** The moment every picture is taken. */
export const NOW = new Date('2026-11-26T09:20:00Z');

/** How Slack shows the ids the blocks mention. */
export const NAMES: Record<string, string> = {
  U0DEV: 'dana',
  U0LEAD: 'lee',
  U0LEAD2: 'kim',
  U0ADMIN: 'alex',
  S0ONCALL: 'oncall',
  C0PROD: 'shop-prod',
};

const PROJECT = { name: 'shop-prod', uuid: '0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10' };
const DB1 = {
  vmid: 102,
  name: 'db-1',
  ha: false,
  cores: 4,
  ramGb: 8,
  osDiskGb: 100,
  cpuClass: 'regular' as const,
  wanMode: 'ipv4' as const,
};

/** dana asks for db-1 to go from 4 cores / 8 GB to 8 cores / 16 GB for two days; lee approved, one more is needed. */
export const request: CloudRequest = {
  id: 'R7Q2K9M4',
  version: 4,
  kind: 'resize',
  state: 'pending',
  teamId: 'T0001',
  channel: 'C0PROD',
  projectName: PROJECT.name,
  projectUuid: PROJECT.uuid,
  vmid: DB1.vmid,
  vmName: DB1.name,
  params: {
    kind: 'resize',
    target: { cores: 8, ramGb: 16 },
    steps: [{ cores: 8, ramGb: 16 }],
    before: {
      vmid: DB1.vmid,
      ha: false,
      cores: 4,
      ramGb: 8,
      osDiskGb: 100,
      wanMode: 'ipv4',
      cpuClass: 'regular',
    },
    confirmedStopped: false,
    lease: { term: { hours: 48 }, returnTo: { cores: 4, ramGb: 8 } },
  },
  reason: 'Black Friday: the shop database needs headroom until Saturday night',
  requester: 'U0DEV',
  needsApproval: true,
  approvers: ['U0LEAD', 'U0LEAD2', 'U0ADMIN'],
  createdAt: '2026-11-26T09:02:00.000Z',
  updatedAt: '2026-11-26T09:14:00.000Z',
  expiresAt: '2026-11-27T09:02:00.000Z',
  nextStep: 0,
  outcomes: [],
  notes: [],
  cost: {
    cluster: 'zone-1',
    currency: 'EUR',
    hourly: '0.2860',
    monthly: '208.78',
    diffHourly: '0.1430',
    diffMonthly: '104.39',
    leaseHourly: '0.1430',
  },
  requiredApprovals: 2,
  approvalRule: 'rule 2 (monthly cost difference over 100 EUR)',
  approvals: [{ user: 'U0LEAD', at: '2026-11-26T09:14:00.000Z' }],
  escalateTo: ['S0ONCALL'],
};

/** The request message as it is posted in #shop-prod. */
export function requestMessage() {
  return createRequestRenderer().requestMessage(request);
}

/**
 * The same request where the rule asks for verified approvals: lee's approval counted once lee's passkey confirmed it
 * on the verification page (docs/approvals.md).
 */
export function verifiedMessage() {
  return createRequestRenderer().requestMessage({
    ...request,
    verify: ['passkey', 'sso'],
    approvals: [
      {
        user: 'U0LEAD',
        at: '2026-11-26T09:14:00.000Z',
        verified: { method: 'passkey', subject: 'kX3v9Qw2LrT8bN1c' },
      },
    ],
  });
}

/** The resize form dana opened with `/cloud resize shop-prod 102 cores=8 ram=16 for=48h`. */
export function resizeForm() {
  return resizeModal({
    sealedDraft: 'D7Q2K9M4',
    projects: [
      { name: 'shop-prod', label: 'shop-prod' },
      { name: 'shop-staging', label: 'shop-staging' },
    ],
    project: PROJECT.name,
    vmid: DB1.vmid,
    vm: DB1,
    typed: { cores: 8, ramGb: 16, lease: { hours: 48 } },
    cpuClassConfigured: true,
    privateNetworkConfigured: true,
  });
}

/** kim's Home tab: dana's request waits for them, and a scheduled downsize of theirs. */
export function appHome() {
  const scheduled: CloudRequest = {
    ...request,
    id: 'R3H8D2X1',
    state: 'queued',
    requester: 'U0LEAD2',
    vmid: 101,
    vmName: 'web-1',
    params: {
      kind: 'resize',
      target: { cores: 2 },
      steps: [{ cores: 2 }],
      before: { vmid: 101, ha: true, cores: 4, ramGb: 8, osDiskGb: 50, wanMode: 'ipv4' },
      confirmedStopped: true,
    },
    reason: 'back to normal after the load test',
    runAt: '2026-11-26T22:00:00.000Z',
    approvals: [{ user: 'U0LEAD', at: '2026-11-26T08:40:00.000Z' }],
    requiredApprovals: 1,
    approvalRule: undefined,
    cost: undefined,
  };
  const inbox: Inbox = {
    user: 'U0LEAD2',
    waiting: [request],
    moreWaiting: { count: 0, channels: [] },
    mine: [scheduled],
    scheduled: [scheduled],
    moreScheduled: 0,
  };
  const nextDigest = new Date('2026-11-27T08:00:00Z');
  return homeView(inbox, NOW, [{ channel: 'C0PROD', label: 'daily 09:00 Europe/Berlin', next: nextDigest }]);
}
