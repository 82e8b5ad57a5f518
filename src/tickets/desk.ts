/**
 * The one interface the request lifecycle asks about change tickets: is this ticket good for this change at this
 * time (it exists, its state is one the policy allows, and a ServiceNow change's window holds the run time), and
 * leave a note on it after the run. A ticket system that cannot be asked is a refusal, never a pass.
 */
import type { ApprovalKind, ChangeTicketPolicy } from '../config/policy.ts';
import {
  TicketError,
  TicketKeyError,
  TicketRequiredError,
  TicketStateError,
  TicketUnauthorisedError,
  TicketUnreachableError,
  TicketWindowError,
} from './errors.ts';
import { jiraKey } from './jira.ts';
import { changeNumber } from './servicenow.ts';
import type { TicketCallOptions, TicketFacts, TicketNote, TicketSystem, TicketSystemName } from './types.ts';

/** A ticket that lets the change go ahead, as checked. */
export type TicketPass = { ok: true } & TicketFacts;
/** Why it does not. */
export type TicketRefusal = { ok: false; error: TicketError };

/** When a ticket is checked: as the request is made (the run may come later), or right before the POST. */
export interface TicketWhen {
  stage: 'create' | 'run';
  now: Date;
  /** A scheduled run's time; `now` when absent. */
  runAt?: Date;
}

const SYSTEM_LABEL: Record<TicketSystemName, string> = { jira: 'Jira', servicenow: 'ServiceNow' };
const SYSTEM_ENV: Record<TicketSystemName, string> = { jira: 'JIRA_URL', servicenow: 'SERVICENOW_URL' };

/** Whether `rule` asks for a ticket for a change of `kind` (its `for`, all three kinds by default). */
export function ticketApplies(
  rule: ChangeTicketPolicy | undefined,
  kind: ApprovalKind,
): rule is ChangeTicketPolicy {
  return rule?.for.includes(kind) === true;
}

export class TicketDesk {
  constructor(private readonly systems: Partial<Record<TicketSystemName, TicketSystem>>) {}

  /** Whether the system is configured (its URL set). */
  has(system: TicketSystemName): boolean {
    return this.systems[system] !== undefined;
  }

  /**
   * Checks `typed` against `rule`. Undefined when no ticket was given and the rule does not require one. Never
   * throws a {@link TicketError}: it comes back as the refusal.
   */
  async check(
    rule: ChangeTicketPolicy,
    typed: string | undefined,
    when: TicketWhen,
    options: TicketCallOptions = {},
  ): Promise<TicketPass | TicketRefusal | undefined> {
    const label = SYSTEM_LABEL[rule.system];
    if (typed === undefined || typed.trim() === '') {
      if (!rule.required) return undefined;
      return refusal(
        new TicketRequiredError(
          '',
          `This change needs a ${label} change ticket in ${rule.states.join(' or ')}: give its ${rule.system === 'jira' ? 'key' : 'number'}.`,
        ),
      );
    }
    try {
      const system = this.systems[rule.system];
      if (!system)
        throw new TicketUnauthorisedError(
          typed,
          `The policy asks for ${label} tickets but ${SYSTEM_ENV[rule.system]} is not set, so no ticket can be checked.`,
        );
      const key = rule.system === 'jira' ? jiraKey(typed) : changeNumber(typed);
      inProjects(rule, key);
      const facts = await system.read(key, options);
      judge(rule, facts, when);
      return { ok: true, ...facts };
    } catch (error) {
      if (error instanceof TicketError) return refusal(error);
      throw error;
    }
  }

  /** Leaves the note on the ticket; throws a {@link TicketError} when it cannot. */
  async note(
    ticket: { system: TicketSystemName; key: string },
    note: TicketNote,
    options?: TicketCallOptions,
  ): Promise<void> {
    const system = this.systems[ticket.system];
    if (!system)
      throw new TicketUnreachableError(
        ticket.key,
        `${SYSTEM_LABEL[ticket.system]} is not configured (${SYSTEM_ENV[ticket.system]}).`,
      );
    await system.note(ticket.key, note, options);
  }

  async close(): Promise<void> {
    await Promise.all(Object.values(this.systems).map((s) => s?.close()));
  }
}

function refusal(error: TicketError): TicketRefusal {
  return { ok: false, error };
}

function inProjects(rule: ChangeTicketPolicy, key: string): void {
  if (!rule.projects) return;
  const project = key.split('-')[0] ?? '';
  if (!rule.projects.includes(project))
    throw new TicketKeyError(
      key,
      `${key} is not a ticket of ${rule.projects.join(' or ')}, the Jira projects this change's tickets come from.`,
    );
}

/** The policy's judgement of a ticket that was read: its state, then (ServiceNow) its window. */
function judge(rule: ChangeTicketPolicy, facts: TicketFacts, when: TicketWhen): void {
  const state = facts.state.trim();
  if (!rule.states.some((allowed) => allowed.toLowerCase() === state.toLowerCase()))
    throw new TicketStateError(
      facts.key,
      `${facts.key} is in state ${quoted(state)}; this change needs it in ${rule.states.map(quoted).join(' or ')}.`,
      state,
    );
  if (rule.system === 'servicenow') judgeWindow(facts, when);
}

function judgeWindow(facts: TicketFacts, when: TicketWhen): void {
  const start = facts.window?.start ?? '';
  const end = facts.window?.end ?? '';
  if (start === '' || end === '')
    throw new TicketWindowError(
      facts.key,
      `${facts.key} has no planned window (its planned start and end dates are not both set).`,
      { start, end },
    );
  const from = new Date(start);
  const to = new Date(end);
  const window = `${when3(from)} to ${when3(to)}`;
  const runAt = when.runAt ?? when.now;
  if (to.getTime() <= when.now.getTime())
    throw new TicketWindowError(facts.key, `${facts.key}'s window (${window}) has ended.`, { start, end });
  // As the request is made, an immediate run may still wait for its approvals until the window opens.
  if (when.stage === 'create' && when.runAt === undefined) return;
  if (runAt.getTime() > to.getTime())
    throw new TicketWindowError(
      facts.key,
      `${facts.key}'s window (${window}) ends before the run at ${when3(runAt)}.`,
      { start, end },
    );
  if (runAt.getTime() < from.getTime())
    throw new TicketWindowError(
      facts.key,
      `${facts.key}'s window (${window}) has not begun at ${when3(runAt)}.`,
      { start, end },
      from,
    );
}

/** `2026-12-07 10:00 UTC`. */
function when3(at: Date): string {
  return `${at.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

function quoted(state: string): string {
  return `“${state.replace(/[^\x20-\x7e]/g, '?').slice(0, 60)}”`;
}
