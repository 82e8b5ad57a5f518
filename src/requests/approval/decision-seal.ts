import type { SealKeys } from '../../config/seal-keys.ts';
import { canonicalJson } from '../model/canonical-json.ts';
import { type CloudRequest, revisionOf } from '../model/types.ts';

/*
 * Sealed decisions (docs/approvals.md#sealed-decisions): every decision that lets a request run (an approval with its
 * verification, "no approval needed", an unattended agent's go-ahead, break glass) carries an HMAC under SEAL_KEY's
 * decision key, made where the decision is recorded. The worker rebuilds the sealed text from the request it is about
 * to send (never from a stored copy of the sealed fields) and sends nothing when a seal does not hold. So a Redis
 * writer without the key can neither write a decision, nor move one onto another request or another change, nor
 * alter what a sealed request would do. Pure: no I/O, no clock.
 */

/** What kind of decision a seal covers. */
export type SealedKind = 'approval' | 'no_approval' | 'agent' | 'break_glass';

/** The decision's own part of the sealed text: who decided, how they proved it, when, at which revision. */
export interface SealedDecision {
  kind: SealedKind;
  /** The approver's or break-glass user's Slack id, the requester (no approval needed) or `agent:NAME`. */
  by: string;
  /** `slack` for a click, else the verification method. */
  method: string;
  /** The passkey's credential id or the SSO subject; '' for a click. */
  subject: string;
  at: string;
  /** The request's revision when the decision was made. */
  revision: number;
}

/**
 * The request's part of every seal, rebuilt from the request itself: its id, workspace, project, VM, what it would do
 * (each field's before and after, the steps, a lease; or the backup), who asked (and the agent), the ticket and the
 * scheduled time. Computed once per request and shared by its decisions.
 */
export function requestFacts(request: CloudRequest): string {
  // A change ticket may be added to requests by its own feature; whatever it holds is sealed, '' when absent.
  const ticket = (request as { ticket?: unknown }).ticket;
  return canonicalJson({
    v: 1,
    request: request.id,
    team: request.teamId,
    project: { uuid: request.projectUuid.toLowerCase(), name: request.projectName },
    vm: request.vmid,
    change: request.params,
    requester: request.requester,
    agent: request.agent?.name ?? '',
    ticket: ticket ?? '',
    runAt: request.runAt ?? '',
  });
}

function sealedText(facts: string, decision: SealedDecision): string {
  return `${facts}\n${canonicalJson(decision)}`;
}

/** The seal of `decision` on `request` ("kid.mac"), under the current SEAL_KEY. */
export function sealDecision(keys: SealKeys, request: CloudRequest, decision: SealedDecision): string {
  return keys.seal('decision', sealedText(requestFacts(request), decision));
}

/** Whether `seal` is `decision`'s on the request whose {@link requestFacts} are `facts` (current or previous key). */
export function decisionHolds(
  keys: SealKeys,
  facts: string,
  decision: SealedDecision,
  seal: string | undefined,
): boolean {
  return typeof seal === 'string' && keys.check('decision', sealedText(facts, decision), seal);
}

/** An approval's decision as sealed: the method is `slack` for a click. */
export function approvalDecision(approval: {
  user: string;
  at: string;
  verified?: { method: string; subject: string };
  revision: number;
}): SealedDecision {
  return {
    kind: 'approval',
    by: approval.user,
    method: approval.verified?.method ?? 'slack',
    subject: approval.verified?.subject ?? '',
    at: approval.at,
    revision: approval.revision,
  };
}

/** The go-ahead of a request that needs no approval: the requester's, or the unattended agent's. */
export function goAheadDecision(
  request: CloudRequest,
  at: string,
  revision = revisionOf(request),
): SealedDecision {
  const agent = request.agent?.name;
  return {
    kind: agent ? 'agent' : 'no_approval',
    by: agent ? `agent:${agent}` : request.requester,
    method: agent ? 'agent' : 'policy',
    subject: '',
    at,
    revision,
  };
}

/**
 * A break glass as sealed: the method is `slack` for a click, else the verification's (a break glass of work whose
 * approvals must be verified, proved on the page), with its credential id or SSO subject.
 */
export function breakGlassDecision(
  by: string,
  at: string,
  revision: number,
  verified?: { method: string; subject: string },
): SealedDecision {
  return {
    kind: 'break_glass',
    by,
    method: verified?.method ?? 'slack',
    subject: verified?.subject ?? '',
    at,
    revision,
  };
}

/** The key id a seal names ("kid.mac"), or undefined when it names none. */
export function sealKid(seal: string | undefined): string | undefined {
  if (typeof seal !== 'string') return undefined;
  const dot = seal.indexOf('.');
  return dot > 0 ? seal.slice(0, dot) : undefined;
}
