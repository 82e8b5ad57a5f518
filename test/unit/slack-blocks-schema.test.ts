import { describe, expect, it } from 'vitest';
import { SlackChecks } from '../../sim/slack/checks.ts';
import type { CloudRequest, ReplyEvent, RequestState } from '../../src/requests/model/types.ts';
import { jobsBlocks } from '../../src/slack/blocks/jobs.ts';
import { rejectModal, resizeModal, restoreModal, scheduleModal } from '../../src/slack/blocks/modals.ts';
import { createRequestRenderer } from '../../src/slack/blocks/request-message.ts';
import { resizeRequest, restoreRequest } from '../fixtures/requests.ts';

/** Every request-side Block Kit builder against Slack's published schema and per-surface limits (vendor/). */
const checks = new SlackChecks();
const renderer = createRequestRenderer();
const at = '2026-03-02T10:00:00.000Z';

function stored(
  state: RequestState,
  base = resizeRequest(),
  extra: Partial<CloudRequest> = {},
): CloudRequest {
  return {
    ...base,
    id: 'R7K2M9QX',
    state,
    version: 3,
    createdAt: at,
    updatedAt: at,
    nextStep: 0,
    outcomes: [],
    messageTs: '1700000000.000100',
    ...extra,
  };
}

const ALL_STATES: RequestState[] = [
  'pending',
  'approved',
  'rejected',
  'expired',
  'cancelled',
  'queued',
  'sending',
  'succeeded',
  'refused',
  'unknown',
  'resolved_done',
  'resolved_failed',
];
const EVENTS: ReplyEvent[] = [
  'approved',
  'rejected',
  'expired',
  'cancelled',
  'step_succeeded',
  'succeeded',
  'refused',
  'unknown',
  'resolved',
];

const decided: Partial<CloudRequest> = {
  approvedBy: 'U0LEAD',
  rejectedBy: 'U0LEAD',
  rejectReason: 'not during *the sale* <!channel>',
  cancelledBy: 'U0DEV',
  resolvedBy: 'U0LEAD',
  reason: 'load test & <migration>',
  notes: ['Lowers cores or RAM: the requester confirmed the VM is stopped.'],
  cost: {
    cluster: 'zone-1',
    currency: 'EUR',
    hourly: '0.0420',
    monthly: '30.66',
    diffHourly: '0.0100',
    diffMonthly: '7.30',
  },
  outcomes: [
    { step: 0, status: 202, taskId: 'task-1', at },
    { step: 1, status: 409, reason: 'The VM is not stopped.', at },
  ],
};

describe('request messages and thread replies pass the Block Kit schema', () => {
  const requests = [
    ...ALL_STATES.map((state) => stored(state, resizeRequest(), decided)),
    ...ALL_STATES.map((state) => stored(state, restoreRequest(), decided)),
    stored(
      'pending',
      resizeRequest({ target: { wanMode: 'ipv6' }, steps: [{ wanMode: 'off' }, { wanMode: 'ipv6' }] }),
    ),
    stored('queued', resizeRequest({ runAt: '2026-03-03T10:01:00.000Z' })),
  ];

  it.each(requests.map((r) => [`${r.kind} ${r.state}`, r] as const))('the %s message', (_, request) => {
    const message = renderer.requestMessage(request);
    expect(message.text.length).toBeGreaterThan(0);
    expect(checks.checkMessageBlocks(message.blocks)).toEqual([]);
  });

  it.each(EVENTS)('the %s reply', (event) => {
    for (const request of requests) {
      const reply = renderer.threadReply(request, event, 1);
      expect(reply.text.length).toBeGreaterThan(0);
      if (reply.blocks) expect(checks.checkMessageBlocks(reply.blocks)).toEqual([]);
    }
  });
});

describe('modals pass the modal schema', () => {
  const projects = [
    { name: 'shop-prod', label: 'shop-prod' },
    { name: 'shop-staging', label: 'shop-staging' },
  ];
  const vm = {
    vmid: 101,
    name: 'web-1',
    ha: true,
    cores: 2,
    ramGb: 4,
    osDiskGb: 50,
    cpuClass: 'regular' as const,
    wanMode: 'ipv4' as const,
  };

  it('the resize modal, empty and filled in', () => {
    for (const configured of [true, false]) {
      const empty = resizeModal({
        sealedDraft: 'D1',
        projects,
        typed: {},
        cpuClassConfigured: configured,
        privateNetworkConfigured: configured,
      });
      expect(checks.checkView(empty)).toEqual([]);
      const filled = resizeModal({
        sealedDraft: 'D1',
        projects,
        project: 'shop-prod',
        vmid: 101,
        vm,
        typed: { cores: 4, ramGb: 8, osDiskGb: 60, cpuClass: 'light', wanMode: 'dual', privateNetwork: 'on' },
        cpuClassConfigured: configured,
        privateNetworkConfigured: configured,
      });
      expect(checks.checkView(filled)).toEqual([]);
    }
  });

  it('the restore, reject and schedule modals', () => {
    expect(checks.checkView(restoreModal({ sealedDraft: 'D2', projects }))).toEqual([]);
    expect(
      checks.checkView(
        restoreModal({
          sealedDraft: 'D2',
          projects,
          project: 'shop-prod',
          vmid: 101,
          backupSlug: 'backup-1',
          vm,
        }),
      ),
    ).toEqual([]);
    expect(checks.checkView(rejectModal('R7K2M9QX', 'shop-prod / VM 101 (web-1)'))).toEqual([]);
    expect(
      checks.checkView(
        scheduleModal('D3', ['Lowering cores is allowed 24 hours after the last increase.'], new Date(at)),
      ),
    ).toEqual([]);
  });
});

describe('/cloud jobs passes the schema and the 50-block limit however many requests there are', () => {
  it.each([0, 1, 30, 200])('%i requests', (count) => {
    const list = Array.from({ length: count }, (_, i) =>
      stored(ALL_STATES[i % ALL_STATES.length] ?? 'pending', resizeRequest({ vmid: 100 + i }), decided),
    );
    const message = jobsBlocks(list);
    expect(checks.checkMessageBlocks(message.blocks)).toEqual([]);
  });
});
