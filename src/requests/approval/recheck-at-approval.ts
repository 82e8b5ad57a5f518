import type { Metrics } from '../../observability/metrics.ts';
import type { CloudRequest, StepOutcome } from '../model/types.ts';
import type { Outbox } from '../outbox.ts';
import type { RequestStore } from '../store/store.ts';
import type { VmFactsStore } from '../vm-facts.ts';
import { type RecheckDeps, recheckRequest } from './recheck-rules.ts';

/** What the re-check at an approval reads and writes; the lifecycle's own deps satisfy it. */
export interface ApprovalRecheckDeps extends RecheckDeps {
  store: RequestStore;
  outbox: Outbox;
  vmFacts: VmFactsStore;
  metrics: Metrics;
}

/**
 * Checks a pending resize again before an approval of it is counted ({@link recheckRequest}, against what the bot
 * knows of the VM now). When it no longer stands it ends refused, with the reason as its outcome (nothing was sent),
 * and its thread is told; the refused request is returned. Undefined when the approval may be counted, or when
 * someone decided first (the approval's own compare-and-set then says so).
 */
export async function refuseIfChanged(
  deps: ApprovalRecheckDeps,
  request: CloudRequest,
  user: string,
): Promise<CloudRequest | undefined> {
  if (request.params.kind !== 'resize') return undefined;
  const vm = await deps.vmFacts.knownFor(deps.policy, request);
  const reason = await recheckRequest(deps, request, vm, 'approval');
  if (!reason) return undefined;
  const outcome: StepOutcome = { step: 0, reason, notSent: true, at: deps.now().toISOString() };
  const detail = `checked again at the approval by ${user}: ${reason}`;
  const refused = await deps.store.transition(
    request.id,
    {
      from: ['pending'],
      to: 'refused',
      actor: 'cloudops',
      patch: { outcomes: [...request.outcomes, outcome] },
      // Audit details stay one short line.
      detail: detail.length > 200 ? `${detail.slice(0, 199)}…` : detail,
    },
    request,
  );
  if (!refused.ok) return undefined;
  deps.metrics.requests.inc({ kind: request.kind, state: 'refused' });
  await deps.outbox.announce(refused.request, 'refused');
  return refused.request;
}
