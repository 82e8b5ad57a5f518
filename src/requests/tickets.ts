/**
 * Change tickets in a request's life (docs/policy.md#change-tickets): which rule applies to a change, the check when
 * the request is made, the check again right before the call to the cloud API, and the note left after the run. The
 * ticket systems themselves are behind {@link TicketDesk}; nothing here knows Jira from ServiceNow.
 */
import {
  type ApprovalKind,
  type ChangeTicketPolicy,
  changeTicketOf,
  type Policy,
  type ProjectPolicy,
} from '../config/policy.ts';
import { classifyChange } from '../rules/change-scope.ts';
import type { ResizeTarget } from '../rules/types.ts';
import { type TicketDesk, ticketApplies } from '../tickets/desk.ts';
import {
  type TicketError,
  TicketRequiredError,
  TicketUnauthorisedError,
  TicketUnreachableError,
  TicketWindowError,
} from '../tickets/errors.ts';
import type { TicketFacts } from '../tickets/types.ts';
import { validityEnd } from './approval/decision-check.ts';
import { RunHoldError } from './model/run-hold.ts';
import type { CloudRequest } from './model/types.ts';

export type { TicketFacts } from '../tickets/types.ts';

/** How long a read may take while a person waits for a form's answer (Slack wants one within 3 s). */
export const TICKET_FORM_TIMEOUT_MS = 2_000;
/** How long a run held by a ticket waits before it looks again. */
export const TICKET_RETRY_MS = 60_000;

export interface TicketDeps {
  policy: Policy;
  /** The configured ticket systems; absent: none (a rule that asks for one refuses every change it covers). */
  tickets?: TicketDesk;
  now: () => Date;
  /** How long a held run waits before it looks again; default {@link TICKET_RETRY_MS}. */
  ticketRetryMs?: number;
}

/** The kinds a resize may count as: one that raises and lowers, or whose direction is unknown, counts as both. */
export function resizeKinds(known: Partial<ResizeTarget>, target: ResizeTarget): ApprovalKind[] {
  const { direction } = classifyChange(known, target);
  if (direction === 'resize_up' || direction === 'none') return ['resize_up'];
  if (direction === 'resize_down') return ['resize_down'];
  return ['resize_up', 'resize_down'];
}

/** The project's change-ticket rule when it covers any of `kinds`. */
export function ticketRuleFor(
  policy: Policy,
  project: ProjectPolicy,
  kinds: ApprovalKind[],
): ChangeTicketPolicy | undefined {
  const rule = changeTicketOf(policy, project);
  return kinds.some((kind) => ticketApplies(rule, kind)) ? rule : undefined;
}

/**
 * Checks the ticket typed for a new request: the facts to store with it, undefined when no rule covers the change
 * (or an optional one was left empty); throws the {@link TicketError} that refuses it.
 */
export async function checkNewTicket(
  deps: TicketDeps,
  project: ProjectPolicy,
  kinds: ApprovalKind[],
  typed: string | undefined,
  options: { runAt?: Date; timeoutMs?: number } = {},
): Promise<TicketFacts | undefined> {
  const rule = ticketRuleFor(deps.policy, project, kinds);
  if (!rule) return undefined;
  if (!deps.tickets) throw noDesk(rule, typed);
  const checked = await deps.tickets.check(
    rule,
    typed,
    { stage: 'create', now: deps.now(), runAt: options.runAt },
    { timeoutMs: options.timeoutMs },
  );
  if (!checked) return undefined;
  if (!checked.ok) throw checked.error;
  const { ok: _ok, ...facts } = checked;
  return facts;
}

/**
 * The lifecycle's guard as a request is stored: a change a required rule covers cannot be stored without a checked
 * ticket, whichever surface made it (a surface that has no Ticket field is refused, never let through).
 */
export function requireTicket(
  deps: TicketDeps,
  project: ProjectPolicy,
  kinds: ApprovalKind[],
  ticket: TicketFacts | undefined,
): void {
  const rule = ticketRuleFor(deps.policy, project, kinds);
  if (!rule || ticket || !rule.required) return;
  throw new TicketRequiredError(
    '',
    `This change needs a ${rule.system === 'jira' ? 'Jira' : 'ServiceNow'} change ticket in ${rule.states.join(' or ')}, and none was given.`,
  );
}

/** A run its ticket holds (the system did not answer, or its window opens later): its job looks again at `at`. */
export class TicketHoldError extends RunHoldError {
  override readonly name = 'TicketHoldError';
  override readonly code = 'TICKET_HOLD';
  constructor(at: Date, reason: string) {
    super(at, reason, 'the change ticket');
  }
}

/**
 * The ticket's part of the checks right before the POST: undefined to send, the sentence why nothing is sent, or a
 * {@link TicketHoldError} thrown to wait. A run with no ticket and no rule asking for one reads nothing.
 */
export async function ticketBeforeSend(deps: TicketDeps, request: CloudRequest): Promise<string | undefined> {
  const anyRule =
    deps.policy.change_ticket !== undefined || deps.policy.projects.some((p) => p.change_ticket);
  if (!request.ticket && !anyRule) return undefined;
  const { params } = request;
  const kinds: ApprovalKind[] =
    params.kind === 'restore' ? ['restore'] : resizeKinds(params.before, params.target);
  const decided = await recheckTicket(deps, request, kinds);
  if (decided.next === 'send') return undefined;
  if (decided.next === 'refuse') return decided.reason;
  throw new TicketHoldError(decided.at, decided.reason);
}

/** What the re-check before the POST decided. */
export type TicketRecheck =
  | { next: 'send'; ticket?: TicketFacts }
  | { next: 'refuse'; reason: string }
  /** Not now: look again at `at` (the ticket system did not answer, or the window opens later). */
  | { next: 'wait'; at: Date; reason: string };

/**
 * Reads the request's ticket again right before the call to the cloud API, against the policy of now. A ticket whose
 * state or window no longer allows the run refuses it; a ticket system that cannot be asked (or a window that opens
 * later) holds the run until the approval's validity ends, then refuses it.
 */
export async function recheckTicket(
  deps: TicketDeps,
  request: CloudRequest,
  kinds: ApprovalKind[],
): Promise<TicketRecheck> {
  const project = deps.policy.projects.find(
    (p) => p.uuid.toLowerCase() === request.projectUuid.toLowerCase(),
  );
  const rule = project && ticketRuleFor(deps.policy, project, kinds);
  const typed = request.ticket?.key;
  if (!rule) return { next: 'send', ticket: request.ticket };
  const now = deps.now();
  let error: TicketError;
  if (!deps.tickets) error = noDesk(rule, typed);
  else {
    const checked = await deps.tickets.check(rule, typed, { stage: 'run', now });
    if (!checked) return { next: 'send' };
    if (checked.ok) {
      const { ok: _ok, ...facts } = checked;
      return { next: 'send', ticket: facts };
    }
    error = checked.error;
  }
  const waits =
    error instanceof TicketUnreachableError ||
    (error instanceof TicketWindowError && error.opensAt !== undefined);
  if (!waits) return { next: 'refuse', reason: `Not sent: ${error.reason}` };
  const until = validUntil(deps.policy, project, request);
  const retryAt = new Date(now.getTime() + (deps.ticketRetryMs ?? TICKET_RETRY_MS));
  const at =
    error instanceof TicketWindowError && error.opensAt && error.opensAt < retryAt ? error.opensAt : retryAt;
  if (at.getTime() > until.getTime())
    return {
      next: 'refuse',
      reason: `Not sent: ${error.reason} The approval was valid until ${until.toISOString().slice(0, 16).replace('T', ' ')} UTC.`,
    };
  return { next: 'wait', at, reason: error.reason };
}

/**
 * The end of the approval's validity, as the worker's decision check counts it ({@link validityEnd}): from the later
 * of the last approval (or the request's making), its break glass and the moment the work became due (its scheduled
 * time, or the end of the freeze that held it then, unless a break glass ran it through that freeze).
 */
export function validUntil(policy: Policy, project: ProjectPolicy, request: CloudRequest): Date {
  const times = [request.approvals?.at(-1)?.at, request.createdAt, request.runAt, request.breakGlass?.at]
    .filter((t): t is string => t !== undefined)
    .map((t) => new Date(t).getTime())
    .filter((t) => Number.isFinite(t));
  return new Date(validityEnd(policy, project, Math.max(...times), request.breakGlass !== undefined));
}

function noDesk(rule: ChangeTicketPolicy, typed: string | undefined): TicketError {
  const name = rule.system === 'jira' ? 'JIRA_URL' : 'SERVICENOW_URL';
  return new TicketUnauthorisedError(
    typed ?? '',
    `The policy asks for ${rule.system === 'jira' ? 'Jira' : 'ServiceNow'} tickets but ${name} is not set, so no ticket can be checked.`,
  );
}

/** The outcome of a run in one line, for the ticket's comment or work note. */
export function ticketNoteText(request: CloudRequest): string {
  const what = request.kind === 'resize' ? 'Resize' : 'Restore';
  const subject = `${what} of VM ${request.vmid}${request.vmName ? ` (${request.vmName})` : ''} in ${request.projectName}, cloudops request ${request.id}`;
  const last = request.outcomes.at(-1);
  switch (request.state) {
    case 'succeeded':
      return `${subject}: succeeded${last?.taskId ? ` (task ${last.taskId})` : ''}${last?.message ? `: ${last.message}` : '.'}`;
    case 'refused':
      return `${subject}: refused${last?.notSent ? ' before anything was sent' : ' by the API'}${last?.reason ? `: ${last.reason}` : '.'}`;
    case 'unknown':
      return `${subject}: outcome unknown${last?.reason ? `: ${last.reason}` : '.'} A person checks the portal.`;
    default:
      return `${subject}: ${request.state}.`;
  }
}
