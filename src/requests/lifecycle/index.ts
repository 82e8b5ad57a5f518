/*
 * A request's whole life, Slack-free, one file per kind of act: create.ts (preview, create), decide.ts (approve,
 * reject, cancel, break glass), run.ts (queue, freeze's end, remind, escalate, expire, resolve); steps.ts holds
 * what they share. Callers import from here.
 */
export type { Decision, Refusal } from '../decision.ts';
export { RequestLifecycle } from './request-lifecycle.ts';
export {
  AGENT_NEEDS_PERSON,
  type AgentAsking,
  AgentLimitError,
  ApprovalUnreachableError,
  type CheckedResize,
  type CheckedRestore,
  type LifecycleDeps,
  type Origin,
} from './types.ts';
