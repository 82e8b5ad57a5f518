/*
 * What a move of a request's state asks for and answers (RequestStore.transition); the lifecycle, the only caller,
 * builds these.
 */
import type { CloudRequest, RequestState } from '../model/types.ts';
import type { VmFactsWrite } from '../vm-facts.ts';

/** A caller asked for an arrow the state machine does not have: a bug, not a race. */
export class IllegalTransitionError extends Error {
  override readonly name = 'IllegalTransitionError';
  readonly code = 'ILLEGAL_TRANSITION';
}

export type TransitionResult =
  | { ok: true; request: CloudRequest }
  | { ok: false; reason: 'not_found' | 'wrong_state'; request?: CloudRequest };

export interface TransitionInput {
  /** States the caller expects the request to be in; the move happens only from one of them. */
  from: RequestState[];
  to: RequestState;
  /** Slack user id, or 'cloudops' for the bot itself. */
  actor: string;
  /** Other fields to set in the same write (e.g. approvedBy, outcomes). */
  patch?: Partial<CloudRequest>;
  /** A short note for the audit log. */
  detail?: string;
  /** What the bot applied to the VM, recorded in the same script as the move (a success and its facts cannot part). */
  vmFacts?: VmFactsWrite;
}
