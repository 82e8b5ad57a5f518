import type { Cluster, Redis } from 'ioredis';
import type { PriceSource } from '../cloud/price-cache.ts';
import type { CloudApi } from '../cloud/types.ts';
import type { Policy } from '../config/policy.ts';
import type { SealKeys } from '../config/seal-keys.ts';
import type { Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import type { ApprovalPolicy } from '../requests/approval/approvers.ts';
import type { RequestLifecycle } from '../requests/lifecycle/request-lifecycle.ts';
import type { CloudRequest } from '../requests/model/types.ts';
import type { RequestStore } from '../requests/store/store.ts';
import type { VmFactsStore } from '../requests/vm-facts.ts';
import type { SlackApi } from '../slack-api/client.ts';
import type { TicketDesk } from '../tickets/desk.ts';
import type { Queues } from './queues.ts';
import type { RequestRenderer } from './renderers.ts';
import type { ReplicaAck } from './replica-ack.ts';
import type { LockPolicy, RetryPolicy } from './retry-policy.ts';

/** What the execution needs; `src/main.ts` wires it, tests pass fast policies. */
export interface ExecutionDeps {
  /**
   * The connection the execute and notify workers run on, ioredis with `maxRetriesPerRequest: null`: waits for Redis
   * to come back instead of failing jobs (the queues they add to are `queues`, on a connection of their own).
   */
  connection: Redis | Cluster;
  /**
   * Where the workers' own keys are written (VM locks, send markers, reply records; `store` should be on it too): a
   * connection that waits like `connection` but carries none of BullMQ's scripts. ioredis copies every script defined
   * on a connection onto each auto-pipelined batch, about 65 of them on BullMQ's, which cost the workers' own round
   * trips more CPU than the commands themselves. Default: `connection`.
   */
  records?: Redis | Cluster;
  prefix: string;
  store: RequestStore;
  /** The request lifecycle on this connection: the expire job expires through it, as a click would. */
  requests: RequestLifecycle;
  vmFacts: VmFactsStore;
  cloud: CloudApi;
  /** The cluster prices (cached): a request's cost is checked again before it is sent. */
  prices: PriceSource;
  policy: Policy;
  /** The worker's own approval policy (its policy file, with user groups): it judges every request before its POST. */
  approvals: ApprovalPolicy;
  /** SEAL_KEY and SEAL_KEY_PREVIOUS: the decisions that let a request run are checked with them before its POST. */
  sealKeys: SealKeys;
  queues: Queues;
  now: () => Date;
  logger: Logger;
  metrics: Metrics;
  slack: SlackApi;
  renderer: RequestRenderer;
  /** Stall detection (and job lock) interval; short in tests so a killed worker's job is picked up soon. */
  stalledIntervalMs?: number;
  /** Retry delays; defaults EXECUTE_RETRY / NOTIFY_RETRY. */
  retry?: { execute: RetryPolicy; notify: RetryPolicy };
  /** The per-VM lock; default VM_LOCK. */
  vmLock?: LockPolicy;
  /** What else follows a change of a request, once its report is handled (App Homes, workflow steps). */
  followUps?: FollowUps;
  /**
   * With Sentinels: waits for a replica to hold the writes a POST or a Slack reply depends on (on `records`, the
   * connection the store, markers and records of the workers use). Absent or disabled: no waiting.
   */
  replicaAck?: ReplicaAck;
  /** The change-ticket systems: a request's ticket is read again before its POST and noted after its run. */
  tickets?: TicketDesk;
  /** How long a run its change ticket holds waits before it looks again; default TICKET_RETRY_MS (60 s). */
  ticketRetryMs?: number;
  /** Jobs run at once per process; different VMs run in parallel. */
  concurrency?: { execute: number; notify: number };
  /** Whether the agent of this name is disabled now (`cloudops agents disable`): its work is not sent then. */
  agentDisabled?: (name: string) => Promise<boolean>;
}

/** Surfaces beyond the request message that follow a request's changes (App Homes, workflow steps). */
export interface FollowUps {
  changed(request: CloudRequest): Promise<void>;
}
