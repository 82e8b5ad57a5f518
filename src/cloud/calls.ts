import { DEFAULT_CALL_DEADLINE_MS } from '../config/env.ts';

// What a call is, for the client and its callers: the operations, the timeouts of each phase and how a call ended.

/** How long each phase of a call may take. */
export interface TimeoutPolicy {
  /** TCP (and TLS) connect; applies to the dispatcher the client creates itself. */
  connectMs: number;
  /** From sending the request to the response headers. */
  headersMs: number;
  /** Between two chunks of the response body. */
  bodyMs: number;
  /**
   * The whole call, from sending to the last byte of the answer, whatever the peer does byte by byte (docs/operations.md#deadlines).
   * Past it a call that was sent ends as outcome unknown.
   */
  totalMs: number;
}

/** Production: generous, since a resize may take the service a while to answer. */
export const DEFAULT_TIMEOUTS: TimeoutPolicy = Object.freeze({
  connectMs: 5_000,
  headersMs: 30_000,
  bodyMs: 30_000,
  totalMs: DEFAULT_CALL_DEADLINE_MS,
});

/** Tests against the local simulator: a hang is noticed within a second. */
export const FAST_TIMEOUTS: TimeoutPolicy = Object.freeze({
  connectMs: 500,
  headersMs: 800,
  bodyMs: 800,
  totalMs: 5_000,
});

/** The operations, as named in errors and metrics. */
export type CloudOperation = 'listClusters' | 'getCluster' | 'resize' | 'restore';

/** How a call ended, for metrics. */
export type CallOutcome = 'ok' | 'refused' | 'rate_limited' | 'unavailable' | 'unknown' | 'protocol';

/** One finished call, reported to `onCall` (metrics). Never carries a header or a body. */
export interface CallReport {
  operation: CloudOperation;
  status?: number;
  outcome: CallOutcome;
  durationMs: number;
}
