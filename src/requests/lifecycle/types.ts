import type { PriceSource } from '../../cloud/price-cache.ts';
import type { Policy, ProjectPolicy } from '../../config/policy.ts';
import type { SealKeys } from '../../config/seal-keys.ts';
import type { VerifyMethod } from '../../config/verification-policy.ts';
import type { Logger } from '../../observability/logger.ts';
import type { Metrics } from '../../observability/metrics.ts';
import type { ResizeCheck } from '../../rules/resize.ts';
import type { ResizeTarget, VmKnown } from '../../rules/types.ts';
import type { TicketDesk } from '../../tickets/desk.ts';
import type { ApprovalPolicy } from '../approval/approvers.ts';
import type { Leases } from '../leases.ts';
import type { Decision } from '../model/decision.ts';
import type { CloudRequest, LeaseAsked, WorkflowStepRun } from '../model/types.ts';
import type { VerifiedBy } from '../model/verification.ts';
import type { Outbox } from '../outbox.ts';
import type { RequestStore } from '../store/store.ts';
import type { TicketFacts } from '../tickets.ts';
import type { VmFactsStore } from '../vm-facts.ts';

/** Who asked, and where the request lives (its message, its thread). */
export interface Origin {
  user: string;
  teamId: string;
  channel: string;
  /** Asked by a Workflow Builder step, which waits for the request's end. */
  workflowStep?: WorkflowStepRun;
  /** Asked by an AI agent for `user` (the person accountable for it): see {@link AgentAsking}. */
  agent?: AgentAsking;
}

/** An agent asking through MCP, with what the policy lets it do (docs/agents.md). */
export interface AgentAsking {
  name: string;
  /** Count-0 approval rules apply to it; otherwise a person always approves. */
  unattended: boolean;
  /** A resize costing more than this per month more is refused before any request exists. */
  maxMonthlyDelta?: number;
  /** Every request of this agent needs verified approvals (a rule's own `verify` names the methods). */
  verify?: VerifyMethod[];
}

/** A resize that passed the rules. */
export interface CheckedResize {
  project: ProjectPolicy;
  vm: VmKnown;
  target: ResizeTarget;
  check: ResizeCheck;
  confirmedStopped: boolean;
  reason?: string;
  /** A scheduled downsize: when it may run. */
  runAt?: Date;
  /** A temporary increase (checked with `checkLease`): how long, and what it returns to. */
  lease?: LeaseAsked;
  /** Notes of the lease check, e.g. that a disk increase stays. */
  leaseNotes?: string[];
  /** This resize returns the lease of that request. */
  returnOf?: string;
  /** The change ticket, as `checkTicket` found it. */
  ticket?: TicketFacts;
}

/** A restore that passed the rules. */
export interface CheckedRestore {
  project: ProjectPolicy;
  vm: VmKnown;
  backupSlug: string;
  autostart: boolean;
  reason?: string;
  /** The change ticket, as `checkTicket` found it. */
  ticket?: TicketFacts;
}

/** A request refused when it is made: its approvals could never come together. Nothing was stored. */
export class ApprovalUnreachableError extends Error {
  override readonly name = 'ApprovalUnreachableError';
  readonly code = 'APPROVAL_UNREACHABLE';
}

/**
 * A person asked where the policy does not let them (`requesters`), or past their `requests_per_hour`. Nothing was
 * stored.
 */
export class RequesterRefusedError extends Error {
  override readonly name = 'RequesterRefusedError';
  readonly code = 'REQUESTER_REFUSED';
}

/** An agent asked for more than its `max_monthly_delta` allows (or a cost nobody can tell). Nothing was stored. */
export class AgentLimitError extends Error {
  override readonly name = 'AgentLimitError';
  readonly code = 'AGENT_LIMIT';
}

/** The rule an agent's request names when the policy's own would let it run without a person. */
export const AGENT_NEEDS_PERSON = 'asked by an agent: a person approves';

export const HOUR_MS = 3_600_000;

export interface LifecycleDeps {
  policy: Policy;
  store: RequestStore;
  outbox: Outbox;
  approvals: ApprovalPolicy;
  prices: PriceSource;
  now: () => Date;
  logger: Logger;
  metrics: Metrics;
  /** What the bot knows of each VM: a resize resolved as applied is recorded there like a success; a lease's offer is checked against it. */
  vmFacts: VmFactsStore;
  /**
   * The configured secret values (tokens, signing secret, API key): a reason someone types is stored, audited and
   * posted to the channel without them or any Slack token or bearer credential pasted into it.
   */
  secrets?: readonly string[];
  /** The change-ticket systems (docs/policy.md#change-tickets); absent: none configured. */
  tickets?: TicketDesk;
  /** Whether the agent of this name is disabled now (`cloudops agents disable`); absent: no agent is. */
  agentDisabled?: (name: string) => Promise<boolean>;
  /**
   * Counts one request of person `user` against `perHour` (the policy's `requests_per_hour`), as an agent's asks are
   * counted; refused with the time they may ask again. Absent: people are not limited.
   */
  takeRequest?: (
    user: string,
    perHour: number,
  ) => Promise<{ ok: true; release(): Promise<void> } | { ok: false; retryAt: Date }>;
  /** SEAL_KEY's keys: the decisions that let a request run are sealed and checked with them. */
  sealKeys?: SealKeys;
}

/** The lifecycle's own acts that other acts call: called through it, so what wraps its acts (tracing) sees them. */
export interface OwnActs {
  approve(request: CloudRequest, user: string, verified?: VerifiedBy, revision?: number): Promise<Decision>;
  breakGlass(request: CloudRequest, user: string, typed: string, verified?: VerifiedBy): Promise<Decision>;
  expireIfDue(request: CloudRequest, detail?: string): Promise<boolean>;
  expire(request: CloudRequest, detail?: string): Promise<Decision>;
  queueApproved(
    request: CloudRequest,
    detail?: string,
    announced?: Promise<void>,
  ): Promise<CloudRequest | undefined>;
}

/** What every act works with: the dependencies, the leases, and the lifecycle itself. */
export interface Acts {
  deps: LifecycleDeps;
  leases: Leases;
  own: OwnActs;
}
