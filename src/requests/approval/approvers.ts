import {
  approvalsOf,
  approversOf,
  breakGlassOf,
  findProject,
  freezeOf,
  type Policy,
  type ProjectPolicy,
  requestersOf,
} from '../../config/policy.ts';
import type { NotAllowed } from '../model/decision.ts';
import type { CloudRequest } from '../model/types.ts';
import {
  type ApprovalPlan,
  type FreezeHit,
  freezeAt,
  planApproval,
  type RuleFacts,
} from './approval-rules.ts';

/** What a person may try to do to a request. */
export type Act = 'approve' | 'reject' | 'cancel' | 'resolve' | 'break_glass' | 'lease';

/** Members of Slack user groups (`S…` ids); implemented on the Slack Web API in `src/slack/user-groups.ts`. */
export interface UserGroups {
  /**
   * The group's members, from a cache while it is fresh; `refresh` asks Slack again unless it was asked moments ago.
   * Undefined when Slack will not resolve the group: it grants nobody.
   */
  members(group: string, refresh?: boolean): Promise<readonly string[] | undefined>;
}

/** A user group id, as opposed to a user id. */
export function isGroup(id: string): boolean {
  return id.startsWith('S');
}

/** Everything an approval needs to know when a request is made: how many, by which rule, and who is escalated to. */
export interface RequestApproval extends ApprovalPlan {
  escalateTo: string[];
  remindAfterHours?: number;
}

/**
 * The one place that answers "who may act on this request", "how many must approve" and "what happens after an
 * approval". Every surface (buttons, modals, App Home, workflow steps) goes through it, never a copy of its rules.
 */
export interface ApprovalPolicy {
  /** The approvers a new request gets, frozen with it (users and groups). */
  approversFor(project: ProjectPolicy): string[];
  /** How many approvals a new request needs and by which rule; its escalation and reminder. */
  planFor(project: ProjectPolicy, mode: 'required' | 'none', facts: RuleFacts): RequestApproval;
  /**
   * Why `user` may not ask for changes in `project` (its `requesters` do not name them, nor a group of theirs), or
   * undefined when they may; a project without `requesters` lets anyone in its channels ask.
   */
  mayRequest(project: ProjectPolicy, user: string): Promise<string | undefined>;
  /** Why `count` approvals can never come together for a request by `requester`, or undefined when they can. */
  unreachable(project: ProjectPolicy, requester: string, count: number): Promise<string | undefined>;
  /**
   * Whether the policy names `user` (directly or through a user group) as an approver of `project`, or among those
   * escalated to: what the worker asks of every recorded approval, never the list stored with the request.
   */
  mayApprove(project: ProjectPolicy, user: string): Promise<boolean>;
  /** Undefined when `user` may do `act` to `request` (its state is checked by the lifecycle, not here). */
  may(request: CloudRequest, user: string, act: Act): Promise<NotAllowed | undefined>;
  /** What an approval leads to at `at`: the queue, or a wait for the end of a freeze. */
  afterApproval(request: CloudRequest, at: Date): { next: 'queue' } | { next: 'freeze'; freeze: FreezeHit };
}

/** A request queued for a later run that has not started: its approvers may cancel it too. */
export function isScheduledWaiting(request: CloudRequest): boolean {
  return request.state === 'queued' && request.runAt !== undefined;
}

/** Who may approve `request` now: its approvers, and once escalated those it was escalated to. */
export function currentApprovers(request: CloudRequest): string[] {
  const escalated = request.escalatedAt ? (request.escalateTo ?? []) : [];
  return [...new Set([...request.approvers, ...escalated])];
}

/**
 * The policy file's approval policy: approvers (users and user groups), counts by rule, escalation, freezes and
 * break glass (docs/policy.md#approval-policies). Without `groups` a group grants nobody.
 */
export function createApprovalPolicy(policy: Policy, groups?: UserGroups): ApprovalPolicy {
  /** Whether `user` is one of `ids` or in one of its groups; a user the cache does not list refreshes it once. */
  const among = async (ids: string[], user: string): Promise<boolean> => {
    if (ids.includes(user)) return true;
    const groupIds = ids.filter(isGroup);
    if (!groups || groupIds.length === 0) return false;
    for (const refresh of [false, true]) {
      for (const group of groupIds) {
        if ((await groups.members(group, refresh))?.includes(user)) return true;
      }
    }
    return false;
  };
  const projectOf = (request: CloudRequest) =>
    findProject(policy, request.projectUuid) ?? findProject(policy, request.projectName);

  return {
    approversFor: (project) => approversOf(policy, project),
    planFor(project, mode, facts) {
      const approvals = approvalsOf(policy, project);
      return {
        ...planApproval(approvals, mode, facts, policy.currency),
        escalateTo: approvals.escalate_to,
        remindAfterHours: approvals.remind_after_hours,
      };
    },
    mayApprove: (project, user) =>
      among([...approversOf(policy, project), ...approvalsOf(policy, project).escalate_to], user),
    async mayRequest(project, user) {
      const requesters = requestersOf(project);
      if (requesters === undefined || (await among(requesters, user))) return undefined;
      return `<@${user}> may not ask for changes in ${project.name}: the policy names who may (requesters), so ask one of them or an admin`;
    },
    async unreachable(project, requester, count) {
      if (count === 0) return undefined;
      const ids = [...approversOf(policy, project), ...approvalsOf(policy, project).escalate_to];
      const people = new Set(ids.filter((id) => !isGroup(id)));
      const unresolved: string[] = [];
      for (const group of ids.filter(isGroup)) {
        const members = groups ? await groups.members(group) : undefined;
        if (!members) unresolved.push(group);
        for (const member of members ?? []) people.add(member);
      }
      people.delete(requester);
      if (people.size >= count) return undefined;
      const groupsNote =
        unresolved.length > 0 ? ` (user group ${unresolved.join(', ')} could not be resolved)` : '';
      return `it needs ${count} approvals from distinct people other than the requester, and only ${people.size} may approve in ${project.name}${groupsNote}`;
    },
    async may(request, user, act) {
      const requester = user === request.requester;
      const approvers = currentApprovers(request);
      switch (act) {
        case 'approve':
          if (requester) return { code: 'own_request' };
          if ((request.approvals ?? []).some((a) => a.user === user)) return { code: 'already_approved' };
          return (await among(approvers, user)) ? undefined : { code: 'not_approver', approvers };
        case 'reject':
          if (requester) return { code: 'own_request' };
          return (await among(approvers, user)) ? undefined : { code: 'not_approver', approvers };
        case 'cancel':
          if (requester) return undefined;
          return (isScheduledWaiting(request) || request.state === 'frozen') && (await among(approvers, user))
            ? undefined
            : { code: 'not_requester' };
        case 'resolve':
        case 'lease':
          return requester || (await among(approvers, user)) ? undefined : { code: 'not_involved' };
        case 'break_glass': {
          const project = projectOf(request);
          const allowed = project ? breakGlassOf(policy, project) : [];
          return (await among(allowed, user)) ? undefined : { code: 'not_break_glass', allowed };
        }
      }
    },
    afterApproval(request, at) {
      const project = projectOf(request);
      const freeze = project ? freezeAt(freezeOf(policy, project), at) : undefined;
      return freeze ? { next: 'freeze', freeze } : { next: 'queue' };
    },
  };
}
