import type { CloudRequest } from '../../src/requests/model/types.ts';
import { ACTIONS } from '../../src/slack/blocks/request-message.ts';
import { BENCH } from './identity.ts';
import type { LoadGenerator } from './load-generator.ts';
import type { LoadRequestKind } from './load-protocol.ts';
import type { Sims } from './sims.ts';
import { clickBody, type SlackIdentity } from './slack-request.ts';

/** Per click that reached the API: click sent → the resize call arriving, and → the run's result reply (ms). */
export interface ApproveClickTimes {
  toApi: number[];
  toReply: number[];
}

/** What one click is about: the VM its resize changes, and the message its replies go under. */
export interface ClickTarget {
  vmid: number;
  messageTs?: string;
}

/**
 * Signed Approve clicks on `pending` (their messages posted) from the load generator's process, at `perSecond`, to
 * the bot at `url`; then waits, up to `timeoutMs`, until every request has its result reply on the Slack stand-in.
 * The reply that counts is the run's result, not the approval's own notice, which may be posted after the API call
 * since both are in flight at once. Arrivals are stamped by the simulators, sends by the load generator.
 */
export function timeApproveClicks(options: {
  what: string;
  sims: Sims;
  load: LoadGenerator;
  url: string;
  approver: SlackIdentity;
  pending: CloudRequest[];
  perSecond: number;
  timeoutMs: number;
}): Promise<ApproveClickTimes> {
  const { pending, ...rest } = options;
  return timeClicks({
    ...rest,
    kind: { type: 'action', actionId: ACTIONS.approve, values: pending.map((r) => r.id) },
    targets: pending,
    resultOnly: true,
  });
}

/**
 * The same clicks on the bare Bolt + BullMQ app (bare-flow-main.ts): its Approve button's value names the VM and the
 * cores (`<vmid>.<cores>`), and its one thread reply is its result.
 */
export function timeBareFlowClicks(options: {
  what: string;
  sims: Sims;
  load: LoadGenerator;
  url: string;
  approver: SlackIdentity;
  /** The bare app's messages, one per VM, with the cores each click asks for. */
  messages: { vmid: number; cores: number; messageTs: string }[];
  perSecond: number;
  timeoutMs: number;
}): Promise<ApproveClickTimes> {
  const { messages, ...rest } = options;
  return timeClicks({
    ...rest,
    kind: {
      type: 'form',
      bodies: messages.map((m) =>
        clickBody(options.approver, 'approve', `${m.vmid}.${m.cores}`, m.messageTs),
      ),
    },
    targets: messages,
    resultOnly: false,
  });
}

/** Sends `kind` (one click per target) at a rate and times each target's API call and reply. */
async function timeClicks(options: {
  what: string;
  sims: Sims;
  load: LoadGenerator;
  url: string;
  approver: SlackIdentity;
  kind: LoadRequestKind;
  targets: ClickTarget[];
  /** Only replies the bot marks as a run's result count; otherwise the thread's first reply. */
  resultOnly: boolean;
  perSecond: number;
  timeoutMs: number;
}): Promise<ApproveClickTimes> {
  const { sims, targets } = options;
  const since = performance.timeOrigin + performance.now();
  const result = await options.load.run({
    url: options.url,
    secret: BENCH.signingSecret,
    who: options.approver,
    kind: options.kind,
    shape: {
      type: 'rate',
      perSecond: options.perSecond,
      durationMs: Math.ceil((targets.length * 1000) / options.perSecond),
    },
    connections: 10,
    timeoutMs: 10_000,
  });
  if (result.errors > 0)
    throw new Error(`${options.what}: ${result.errors} clicks failed (${result.firstError})`);
  const deadline = performance.now() + options.timeoutMs;
  for (;;) {
    const times = await sims.callTimes(since);
    const apiAt = new Map<number, number>();
    for (const r of times.resizes) if (!apiAt.has(r.vmid)) apiAt.set(r.vmid, r.atMs);
    const out: ApproveClickTimes = { toApi: [], toReply: [] };
    targets.forEach((target, i) => {
      const sent = result.sentAtMs[i];
      const api = apiAt.get(target.vmid);
      if (sent === undefined || api === undefined) return;
      out.toApi.push(api - sent);
      const reply = times.replies.find(
        (r) => (r.result || !options.resultOnly) && r.threadTs === target.messageTs,
      );
      if (reply) out.toReply.push(reply.atMs - sent);
    });
    if (out.toReply.length >= targets.length || performance.now() > deadline) return out;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
