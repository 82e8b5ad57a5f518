import type { App } from '@slack/bolt';
import type { PriceSource } from '../cloud/price-cache.ts';
import type { Policy, ProjectPolicy } from '../config/policy.ts';
import type { Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import type { ApprovalPolicy } from '../requests/approval/approvers.ts';
import type { VerificationLinks } from '../requests/approval/verified-approval.ts';
import type { RequestLifecycle } from '../requests/lifecycle/request-lifecycle.ts';
import type { RequestStore } from '../requests/store/store.ts';
import type { VmFactsStore } from '../requests/vm-facts.ts';
import type { SlackApi } from '../slack-api/client.ts';
import type { DraftStore } from './drafts.ts';

/** Everything the Slack side needs; built by main.ts, replaced by tests. */
export interface SlackDeps {
  policy: Policy;
  /** Reads requests (lookups behind clicks, `/cloud jobs`); every change goes through `requests`. */
  store: RequestStore;
  /** A request's life: create, approve, reject, cancel, resolve, expire. */
  requests: RequestLifecycle;
  /** What the handlers send to Slack themselves (modals, ephemeral answers): the lean Web API client. */
  slack: SlackApi;
  /** Who may act on a request: the App Home lists what each person may approve or cancel through it. */
  approvals: ApprovalPolicy;
  /** App Home opens: published within the views.publish budget, or handed to the home queue (src/jobs/home.ts). */
  homes: { opened(user: string): Promise<'published' | 'queued' | 'coalesced'> };
  /** Where a workflow step's token waits for its request's end (never logged). */
  stepTokens: { save(executionId: string, token: string): Promise<boolean> };
  vmFacts: VmFactsStore;
  drafts: DraftStore;
  prices: PriceSource;
  now: () => Date;
  logger: Logger;
  metrics: Metrics;
  /**
   * Issues approvers' verification links (src/verify/); unset where no verification page runs, and then an approval
   * that must be verified is refused with that said.
   */
  links?: VerificationLinks;
  /** Issues passkey registration links for the App Home's "Register a passkey" (src/verify/); unset without a page. */
  passkeyLinks?: { issue(teamId: string, user: string): Promise<string> };
  /** Extra `/cloud` words from other features (pricing). */
  words?: CommandWord[];
}

/** One `/cloud <word>`: its usage line for help, and its handler (which must ack). */
export interface CommandWord {
  word: string;
  usage: string;
  summary: string;
  handle(ctx: CommandContext): Promise<void>;
}

export type CommandArgs = Parameters<Parameters<App['command']>[1]>[0];

export interface CommandContext {
  args: string[];
  slack: CommandArgs;
  deps: SlackDeps;
}

/** Projects that may be operated from `channel`. */
export function projectsForChannel(policy: Policy, channel: string): ProjectPolicy[] {
  return policy.projects.filter((p) => p.channels.includes(channel));
}

/** "shop-prod can be operated in <#C0PROD>, <#C0OPS>." */
export function whereProjectLives(project: ProjectPolicy): string {
  return `${project.name} can be operated in ${project.channels.map((c) => `<#${c}>`).join(', ')}.`;
}

/**
 * Resolves after the event loop has read every request already waiting: work after an `ack()` awaits this first,
 * so under load the acks of queued requests go out before the slower work of earlier ones (Redis, views.open).
 */
export function afterWaitingAcks(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** A Redis call that must not hold up Slack's 3-second answer. */
export async function withDeadline<T>(promise: Promise<T>, ms = 1500): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StoreUnavailableError()), ms);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * All the Redis work a modal submission does before its ack shares this budget (docs/operations.md#deadlines: Slack's answer
 * within 3 s, whatever Redis does), leaving the rest of the 3 s for the answer to travel.
 */
export const PRE_ACK_BUDGET_MS = 2_000;

/** One deadline for several Redis calls before an ack: each call waits only what is left of `ms`. */
export function ackBudget(ms = PRE_ACK_BUDGET_MS): <T>(promise: Promise<T>) => Promise<T> {
  const end = performance.now() + ms;
  return (promise) => withDeadline(promise, Math.max(0, Math.floor(end - performance.now())));
}

/** The bot's own storage did not answer in time. */
export class StoreUnavailableError extends Error {
  override readonly name = 'StoreUnavailableError';
  readonly code = 'STORE_UNAVAILABLE';
  constructor(cause?: unknown) {
    super(cause === undefined ? 'storage did not answer in time' : 'storage failed', { cause });
  }
}

/**
 * Work that only reads or writes Redis, bounded like {@link withDeadline}: whatever makes it fail (Redis down, a
 * connection refused or closed, no answer in time) is the store's failure, a StoreUnavailableError with the cause.
 */
export function fromStore<T>(promise: Promise<T>, ms?: number): Promise<T> {
  return withDeadline(
    promise.catch((error: unknown) => {
      throw new StoreUnavailableError(error);
    }),
    ms,
  );
}

/** What a person reads when Redis is down: clear, and says nothing was lost or done. */
export const TRY_AGAIN =
  ':warning: cloudops cannot reach its database right now, so nothing was saved or sent. Please try again in a minute.';
