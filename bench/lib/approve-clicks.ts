import type { CloudRequest } from '../../src/requests/types.ts';
import { ACTIONS } from '../../src/slack/blocks/request-message.ts';
import { BENCH } from './identity.ts';
import type { LoadGenerator } from './load-generator.ts';
import type { Sims } from './sims.ts';
import type { SlackIdentity } from './slack-request.ts';

/** Per click that reached the API: click sent → the resize call arriving, and → the run's result reply (ms). */
export interface ApproveClickTimes {
  toApi: number[];
  toReply: number[];
}

/**
 * Signed Approve clicks on `pending` (their messages posted) from the load generator's process, at `perSecond`, to
 * the bot at `url`; then waits, up to `timeoutMs`, until every request has its result reply on the Slack stand-in.
 * The reply that counts is the run's result, not the approval's own notice, which may be posted after the API call
 * since both are in flight at once. Arrivals are stamped by the simulators, sends by the load generator.
 */
export async function timeApproveClicks(options: {
  what: string;
  sims: Sims;
  load: LoadGenerator;
  url: string;
  approver: SlackIdentity;
  pending: CloudRequest[];
  perSecond: number;
  timeoutMs: number;
}): Promise<ApproveClickTimes> {
  const { sims, pending } = options;
  const since = performance.timeOrigin + performance.now();
  const result = await options.load.run({
    url: options.url,
    secret: BENCH.signingSecret,
    who: options.approver,
    kind: { type: 'action', actionId: ACTIONS.approve, values: pending.map((r) => r.id) },
    shape: {
      type: 'rate',
      perSecond: options.perSecond,
      durationMs: Math.ceil((pending.length * 1000) / options.perSecond),
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
    pending.forEach((request, i) => {
      const sent = result.sentAtMs[i];
      const api = apiAt.get(request.vmid);
      if (sent === undefined || api === undefined) return;
      out.toApi.push(api - sent);
      const reply = times.replies.find((r) => r.result && r.threadTs === request.messageTs);
      if (reply) out.toReply.push(reply.atMs - sent);
    });
    if (out.toReply.length >= pending.length || performance.now() > deadline) return out;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
