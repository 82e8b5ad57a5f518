import type { VerifyMethod } from '../../config/verification-policy.ts';
import type { LeaseReturn, LeaseTerm } from '../../rules/lease.ts';
import type { ResizeTarget, VmKnown } from '../../rules/types.ts';
import type { TicketFacts } from '../../tickets/types.ts';
import type { AuditRecord } from './audit-record.ts';
import type { VerifiedBy } from './verification.ts';

export type RequestKind = 'resize' | 'restore';

/** What happened to a request that its thread is told about, one reply each. */
export type ReplyEvent =
  | 'approved'
  | 'rejected'
  | 'expired'
  | 'cancelled'
  | 'step_succeeded'
  | 'succeeded'
  | 'refused'
  | 'unknown'
  | 'resolved'
  /** Approved, but a freeze holds it: it runs when the window ends. */
  | 'frozen'
  /** The freeze ended and the rules still let it run: queued. */
  | 'unfrozen'
  /** A break-glass user ran frozen work now, with a reason. */
  | 'break_glass'
  /** Nobody acted for `remind_after_hours`: those who have not are mentioned once. */
  | 'reminder'
  /** 75 % of the approval TTL passed: `escalate_to` are mentioned and may approve. */
  | 'escalated'
  /** A lease ended (and the 24-hour rule allows lowering): the return is offered, with what it cost. */
  | 'lease_offer'
  /** One a day while the lease is open; the step is its number. */
  | 'lease_reminder'
  /** "Keep it": the size stays, the lease is closed. */
  | 'lease_kept'
  /** The return request succeeded: the lease is closed. */
  | 'lease_returned';

/**
 * A request's life (docs/requests.md#a-requests-life). Arrows are the only moves `RequestStore.transition` allows:
 * pending → approved | rejected | expired | cancelled | refused (checked again at an approval: nothing sent)
 * approved → queued; pending → queued (no approval needed)
 * queued → sending | cancelled (a scheduled run that has not started)
 * sending → succeeded | refused | unknown | queued (a retry that surely did not reach the API)
 * unknown → resolved_done | resolved_failed (a person checked the portal)
 * approved | pending → frozen (a freeze holds it; pending only when it needs no approval)
 * frozen → queued (the window ended, or break glass) | cancelled
 * A scheduled downsize is a pending request with `runAt`: once approved, its job waits until then.
 */
export type RequestState =
  | 'pending'
  | 'approved'
  | 'rejected'
  | 'expired'
  | 'cancelled'
  | 'queued'
  | 'sending'
  | 'succeeded'
  | 'refused'
  | 'unknown'
  | 'resolved_done'
  | 'resolved_failed'
  | 'frozen';

export const FINAL_STATES: readonly RequestState[] = [
  'rejected',
  'expired',
  'cancelled',
  'succeeded',
  'refused',
  'resolved_done',
  'resolved_failed',
];

export interface ResizeParams {
  kind: 'resize';
  /** The target as asked. */
  target: ResizeTarget;
  /** The bodies to send, in order: one step, or two for a WAN switch through `off`. */
  steps: ResizeTarget[];
  /** What the bot knew of the VM when the request was made (for "from → to"). */
  before: Omit<VmKnown, 'createdAt' | 'lastIncreaseAt'>;
  /** The requester confirmed the VM is stopped. */
  confirmedStopped: boolean;
  /** A temporary increase: how long, and the size it returns to (docs/policy.md#temporary-changes-leases). */
  lease?: LeaseAsked;
  /** This resize returns the lease of that request; its success ends that lease. */
  returnOf?: string;
}

/** A temporary increase as it was asked for. */
export interface LeaseAsked {
  term: LeaseTerm;
  /** The values before the increase, of the fields it raises. */
  returnTo: LeaseReturn;
}

/** A lease once its increase ran: kept on the request until the return succeeds or someone keeps the size. */
export interface Lease {
  startedAt: string;
  endsAt: string;
  /** When the return was offered in the thread (never before the 24-hour rule allows it). */
  offeredAt?: string;
  /** The last daily reminder, and how many there were. */
  remindedAt?: string;
  reminders?: number;
  /** At the offer: the size the bot knew then, when another request had changed the VM since the increase. */
  changedSince?: LeaseReturn;
  /** The return request made from the offer, the latest one. */
  returnRequestId?: string;
  /** "Keep it": who, why, when (the lease ends). */
  kept?: { by: string; reason: string; at: string };
  /** The return succeeded (the lease ends). */
  returned?: { requestId: string; at: string };
}

export interface RestoreParams {
  kind: 'restore';
  backupSlug: string;
  autostart: boolean;
  confirmedStopped: boolean;
}

/** One API answer, kept for the thread reply and the audit. */
export interface StepOutcome {
  step: number;
  status?: number;
  message?: string;
  taskId?: string;
  /** For refusals and unknown outcomes: the clean sentence. */
  reason?: string;
  /** cloudops refused it itself, checking it again before sending: nothing reached the API. */
  notSent?: boolean;
  at: string;
}

/** Whether `request` ended refused by cloudops's own re-check (nothing sent), not by the API. */
export function refusedBeforeSending(request: Pick<CloudRequest, 'state' | 'outcomes'>): boolean {
  return request.state === 'refused' && request.outcomes.at(-1)?.notSent === true;
}

/** The cost preview shown on the request message, computed once when the request is made. */
export interface CostPreview {
  cluster: string;
  currency: string;
  /** Cost of the size after the change, as exact decimal strings. */
  hourly: string;
  monthly: string;
  /** After minus before, where the size before is known. */
  diffHourly?: string;
  diffMonthly?: string;
  /** Why the preview is partial, e.g. a price the cluster does not list. */
  note?: string;
  /** For a temporary increase: what the raised fields cost per hour over the size it returns to. */
  leaseHourly?: string;
}

export interface CloudRequest {
  id: string;
  kind: RequestKind;
  state: RequestState;
  /** Incremented by every transition; compare-and-set guards concurrent clicks. */
  version: number;
  /**
   * Moves only when the request changes its state, what it would do (its params) or the verification it asks for;
   * not with approvals short of the count, reminders or message updates. What a verification link is bound to; absent on older requests: 1.
   */
  revision?: number;
  teamId: string;
  channel: string;
  /** The request message in the channel, once posted; replies go in its thread. */
  messageTs?: string;
  projectName: string;
  projectUuid: string;
  vmid: number;
  vmName?: string;
  params: ResizeParams | RestoreParams;
  requester: string;
  reason?: string;
  needsApproval: boolean;
  /** Slack user ids allowed to approve, frozen at creation. */
  approvers: string[];
  createdAt: string;
  updatedAt: string;
  /** Pending requests expire at this time. */
  expiresAt: string;
  /** For a scheduled downsize: when it becomes runnable. */
  runAt?: string;
  approvedBy?: string;
  rejectedBy?: string;
  rejectReason?: string;
  cancelledBy?: string;
  resolvedBy?: string;
  /** Index of the next step to send (WAN plans have two). */
  nextStep: number;
  outcomes: StepOutcome[];
  cost?: CostPreview;
  /** The rules that apply, one line each, shown on the request message. */
  notes: string[];
  /** Distinct approvals it needs (docs/policy.md#approval-policies); absent on older requests: one. */
  requiredApprovals?: number;
  /** The rule that set the count, in words, shown on the message. */
  approvalRule?: string;
  /** Each approval so far, in order; the one that reached the count is last. */
  approvals?: Approval[];
  /**
   * Every approval must be verified, by one of these methods (docs/policy.md#verified-approvals); fixed when the
   * request is made, like its approvers. Absent: a click counts.
   */
  verify?: VerifyMethod[];
  /** Users and groups mentioned at 75 % of the TTL; they may approve once `escalatedAt` is set. */
  escalateTo?: string[];
  escalatedAt?: string;
  remindedAt?: string;
  /** A freeze holds it until then (state `frozen`). */
  frozenUntil?: string;
  freezeReason?: string;
  /**
   * Frozen work run now by a break-glass user; sealed like an approval (approval/decision-seal.ts). `verified`: how
   * they proved who they are, where the request's approvals must be verified (docs/approvals.md).
   */
  breakGlass?: {
    by: string;
    reason: string;
    at: string;
    revision?: number;
    seal?: string;
    verified?: VerifiedBy;
  };
  /**
   * The sealed decision that let a request needing no approval run: the policy's "no approval needed", or an
   * unattended agent's go-ahead (approval/decision-seal.ts). The worker checks it before the POST.
   */
  goAhead?: GoAhead;
  /** A temporary change whose return is still open: retention never removes the request meanwhile. */
  leaseOpen?: boolean;
  /** The lease, once the temporary increase ran. */
  lease?: Lease;
  /** Made by a Workflow Builder step, which completes when the request ends (its token is kept apart). */
  workflowStep?: WorkflowStepRun;
  /** Asked by an AI agent through MCP; `requester` is the person it acts for (docs/agents.md). */
  agent?: AgentRequester;
  /** The change ticket it names, as its system answered at the last check (docs/policy.md#change-tickets). */
  ticket?: TicketFacts;
}

/** One counted approval: who, when, and how they proved who they are where the request needs it. */
export interface Approval {
  user: string;
  at: string;
  verified?: VerifiedBy;
  /** The request's revision when it counted: part of its seal. */
  revision?: number;
  /** `kid.mac` under SEAL_KEY (approval/decision-seal.ts): the worker runs nothing on an approval without it. */
  seal?: string;
}

/** A decision that lets a request run with no person's approval, sealed when it is made. */
export interface GoAhead {
  /** `no_approval`: the policy asks none; `agent`: an unattended agent's count-0 request. */
  kind: 'no_approval' | 'agent';
  at: string;
  /** The request's revision when it was decided. */
  revision: number;
  seal: string;
}

/** A request's {@link CloudRequest.revision}: 1 for requests stored before it existed. */
export function revisionOf(request: Pick<CloudRequest, 'revision'>): number {
  return request.revision ?? 1;
}

/** The agent that asked, as the policy names it. */
export interface AgentRequester {
  name: string;
  /** Set while an admin has the agent disabled (`cloudops agents disable`): the request cannot be approved. */
  disabled?: boolean;
}

/** How an agent appears as an actor in the audit and on the request message. */
export function agentActor(name: string): string {
  return `agent:${name}`;
}

/** The workflow step run (custom function execution) that made a request. */
export interface WorkflowStepRun {
  /** The step's callback id in the manifest, e.g. `request_vm_resize`. */
  callbackId: string;
  /** Slack's `function_execution_id`. */
  executionId: string;
}

/**
 * Audit entries that record a decision without a change of state: an approval short of the count, a reminder, an
 * escalation, a freeze re-checked.
 */
export type AuditNote =
  | 'approval'
  | 'reminder'
  | 'escalation'
  | 'freeze'
  | 'lease'
  /** An agent disabled or enabled (`cloudops agents`): an entry of no request. */
  | 'agent'
  /** A passkey registered or reset (src/verify/, `cloudops passkeys reset`): an entry of no request. */
  | 'passkey'
  /**
   * A record whose SEAL_KEY seal does not check was refused (a passkey, link or page session written outside the
   * bot), or the worker found a decision's seal missing, wrong or expired: nothing was sent (approval/decision-check.ts).
   */
  | 'seal_invalid'
  /** The policy file was reloaded with a new version: an entry of no request. */
  | 'policy_changed';

/** One line of the audit log. */
export interface AuditEntry {
  /** Stream id, e.g. '1700000000000-0'. */
  id: string;
  requestId: string;
  state: RequestState | 'created' | AuditNote;
  actor: string;
  at: string;
  detail?: string;
  /** The whole entry as chained (absent on entries written before the chain): what the export and verify read. */
  record?: AuditRecord;
}

/** The arrows of the state machine documented on {@link RequestState}; `RequestStore.transition` refuses any other. */
export const ALLOWED_TRANSITIONS: Readonly<Record<RequestState, readonly RequestState[]>> = {
  pending: ['approved', 'rejected', 'expired', 'cancelled', 'queued', 'frozen', 'refused'],
  approved: ['queued', 'frozen'],
  frozen: ['queued', 'cancelled'],
  rejected: [],
  expired: [],
  cancelled: [],
  queued: ['sending', 'cancelled'],
  sending: ['succeeded', 'refused', 'unknown', 'queued'],
  succeeded: [],
  refused: [],
  unknown: ['resolved_done', 'resolved_failed'],
  resolved_done: [],
  resolved_failed: [],
};

/** A new request as the Slack side submits it; the store fills in the rest. */
export type NewRequest = Omit<
  CloudRequest,
  'id' | 'state' | 'version' | 'createdAt' | 'updatedAt' | 'nextStep' | 'outcomes'
> & { state: 'pending' | 'queued' };
