/** What a start is given beside the environment and the policy, and what a started bot hands back. */

import type { AuditExportPolicy } from '../audit-export/shipper.ts';
import type { ReloadOutcome } from '../config/policy-source.ts';
import type { DuePolicy } from '../jobs/due-times.ts';
import type { ExecutionConcurrency } from '../jobs/execution.ts';
import type { HomeRate } from '../jobs/home.ts';
import type { RetentionPolicy } from '../jobs/retention-sweeper.ts';
import type { LockPolicy } from '../jobs/retry-policy.ts';
import type { SweepPolicy } from '../jobs/stranded-sweeper.ts';
import type { Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import type { VerificationLinks, VerifiedApprover } from '../requests/approval/verified-approval.ts';
import type { ReconnectPolicy } from '../slack/socket-link.ts';
import type { CloudCheckPolicy } from './cloud-check.ts';

/** A running bot: what it listens on, and how to stop it. */
export interface Running {
  port?: number;
  /** Where `/metrics` listens (METRICS_PORT on METRICS_HOST; the one picked when METRICS_PORT is 0). */
  metricsPort: number;
  /** Where the MCP server listens (web role with MCP_PORT set; the one picked when MCP_PORT is 0). */
  mcpPort?: number;
  metrics: Metrics;
  /** The version of the policy in force (the first 12 hex digits of the SHA-256 of its file). */
  policyVersion(): string;
  /** Reads POLICY_FILE again (docs/policy.md#reload); a policy given as an object never changes. */
  reloadPolicy(why?: string): Promise<ReloadOutcome>;
  /** Stops taking work, finishes or hands back what runs, closes every connection: within the shutdown deadline. */
  stop(): Promise<void>;
}

export interface StartOptions {
  /** Injected clock for tests and the demo; defaults to the wall clock. */
  now?: () => Date;
  logger?: Logger;
  /** The whole shutdown's deadline, a running API call included (default SHUTDOWN_DEADLINE_MS). */
  shutdownTimeoutMs?: number;
  /** Ends the start-up early (a stop asked for): what was opened is closed, and the start rejects with its reason. */
  signal?: AbortSignal;
  /**
   * How long the start-up may take: past it, what was opened is closed and the start rejects with a StartupError
   * naming what it was waiting for. Unset: no deadline beyond the Redis and Slack checks' own.
   */
  startupTimeoutMs?: number;
  /** Milliseconds added to each start-up wait's own limit (STARTUP_TIMEOUT_SECONDS above its default); 0 unless set. */
  startupSpareMs?: number;
  /** Test knobs for BullMQ (short stall detection). */
  stalledIntervalMs?: number;
  /** Jobs at once per worker process; default DEFAULT_CONCURRENCY of `src/jobs/execution.ts`. */
  concurrency?: ExecutionConcurrency;
  /** The per-VM lock of the workers (default VM_LOCK); tests use a fast one so a lock a failover left behind frees soon. */
  vmLock?: LockPolicy;
  /** How long a run its change ticket holds waits before it looks again (default 60 s; short in tests). */
  ticketRetryMs?: number;
  /** How often workers look for requests stranded between two writes; tests use a fast one. */
  sweepPolicy?: SweepPolicy;
  /** How often workers remove what retention let go; tests use a fast one. */
  retentionPolicy?: RetentionPolicy;
  /** Batch size, polling and backoff of the audit export (default AUDIT_EXPORT_POLICY of `src/audit-export/shipper.ts`). */
  auditExportPolicy?: AuditExportPolicy;
  /** How often the scheduler looks for due reminders, escalations and freeze ends; tests use a fast one. */
  duePolicy?: DuePolicy;
  /** How long user group members are cached, and the least time between two refreshes a click forces. */
  userGroupCache?: { cacheMs: number; refreshGapMs: number };
  /** How often the cloud API is checked again (default CLOUD_CHECK of `src/startup/cloud-check.ts`). */
  cloudCheck?: CloudCheckPolicy;
  /** The views.publish budget of App Home opens and refreshes together (default HOME_RATE); tests use a small one. */
  homeRate?: HomeRate;
  /** Repeated opens of one person's unchanged home publish nothing within this (default HOME_OPEN_COALESCE_MS). */
  homeOpenCoalesceMs?: number;
  /** Socket Mode's reconnect backoff and hello deadline; default RECONNECT_POLICY of `src/slack/socket-link.ts`. */
  reconnectPolicy?: ReconnectPolicy;
  /**
   * The approvers' verification links, given what counts a verified approval (web role). Unset: the web role runs no
   * verification page, and an approval that must be verified is refused with that said.
   */
  verificationLinks?: (approvals: VerifiedApprover) => VerificationLinks;
}
