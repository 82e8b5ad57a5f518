import {
  type ApprovalPolicy,
  currentApprovers,
  isGroup,
  isScheduledWaiting,
  type UserGroups,
} from './approval/approvers.ts';
import type { CloudRequest } from './model/types.ts';
import type { RequestStore } from './store/store.ts';

/** How much of each list a person's inbox carries; the rest is counted. */
export interface InboxLimits {
  waiting: number;
  mine: number;
  scheduled: number;
  /** Open leases (default {@link LEASES_SHOWN}). */
  leases?: number;
}

/** What the App Home shows in full: the rest is counted and pointed to, so a home stays within Slack's 100 blocks. */
export const INBOX_LIMITS: Readonly<InboxLimits> = Object.freeze({ waiting: 30, mine: 10, scheduled: 10 });
/** How many of a person's open leases their inbox carries. */
export const LEASES_SHOWN = 10;
/**
 * How many open leases (everyone's, the earliest end first) a home reads to find a person's: the open-lease index is
 * one for all, and leases are few (each is a VM at a temporary size); past this, the rest are left to `/cloud jobs`.
 */
export const LEASES_READ = 500;

/** One person's view of the requests they take part in (the App Home's content, without Slack). */
export interface Inbox {
  user: string;
  /** Requests this person may approve now, oldest first. */
  waiting: CloudRequest[];
  /** Those beyond `waiting`: how many, and the channels whose request messages carry them. */
  moreWaiting: { count: number; channels: string[] };
  /** Their own most recent requests, newest first. */
  mine: CloudRequest[];
  /** Scheduled runs that have not started and that this person may cancel, soonest first. */
  scheduled: CloudRequest[];
  moreScheduled: number;
  /** Open leases this person may return or keep (the requester, an approver), the earliest end first. */
  leases?: CloudRequest[];
  /** Those beyond `leases`: how many, and their channels (`/cloud jobs` there lists them). */
  moreLeases?: { count: number; channels: string[] };
}

export interface InboxDeps {
  store: RequestStore;
  approvals: ApprovalPolicy;
  now: () => Date;
  /** The user groups `user` belongs to (of those the policy names): their involvement indexes are read too. */
  groupsOf?: (user: string) => Promise<string[]>;
}

/**
 * Which of `candidates` (the groups the policy names) `user` is a member of, from the user-group cache. A group Slack
 * will not resolve has no members here, as it grants nobody.
 */
export function groupsOfMember(
  groups: UserGroups,
  candidates: readonly string[],
): (user: string) => Promise<string[]> {
  return async (user) => {
    const found = await Promise.all(
      candidates.map(async (group) => ((await groups.members(group))?.includes(user) ? group : undefined)),
    );
    return found.filter((g): g is string => g !== undefined);
  };
}

/**
 * The live requests that name `user` or one of their groups, oldest first, once each: a request reaches a group's
 * members through the group's own index, so joining a group needs no index write.
 */
async function involving(store: RequestStore, ids: string[]): Promise<CloudRequest[]> {
  const lists = await Promise.all(ids.map((id) => store.listInvolving(id)));
  if (lists.length === 1) return lists[0]?.requests ?? [];
  const byId = new Map<string, CloudRequest>();
  for (const list of lists) for (const request of list.requests) byId.set(request.id, request);
  return [...byId.values()].sort(
    (a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id),
  );
}

/**
 * The open leases `user` may return or keep, the earliest end first. The open-lease index is read (bounded) and
 * narrowed to those naming the person or one of their groups before the approval policy decides each.
 */
async function leasesOf(deps: InboxDeps, user: string, ids: string[]): Promise<CloudRequest[]> {
  const named = new Set(ids);
  const open = await deps.store.openLeases(undefined, LEASES_READ);
  const mayAct: CloudRequest[] = [];
  for (const request of open) {
    if (!named.has(request.requester) && !currentApprovers(request).some((id) => named.has(id))) continue;
    if (!(await deps.approvals.may(request, user, 'lease'))) mayAct.push(request);
  }
  return mayAct;
}

/**
 * Reads `user`'s inbox from their involvement index and those of their groups (never all requests), and their open
 * leases. Who may approve or cancel is asked of the
 * approval policy, request by request: the same answer a click would get.
 */
export async function readInbox(
  deps: InboxDeps,
  user: string,
  limits: InboxLimits = INBOX_LIMITS,
): Promise<Inbox> {
  const ids = [user, ...(deps.groupsOf ? await deps.groupsOf(user) : [])];
  const [live, mine, leases] = await Promise.all([
    involving(deps.store, ids),
    deps.store.listRequestedBy(user, limits.mine),
    leasesOf(deps, user, ids),
  ]);
  const now = deps.now().getTime();
  const waiting: CloudRequest[] = [];
  const scheduled: CloudRequest[] = [];
  for (const request of live) {
    if (
      request.state === 'pending' &&
      request.needsApproval &&
      new Date(request.expiresAt).getTime() > now &&
      !(await deps.approvals.may(request, user, 'approve'))
    ) {
      waiting.push(request);
    } else if (isScheduledWaiting(request) && !(await deps.approvals.may(request, user, 'cancel'))) {
      scheduled.push(request);
    }
  }
  scheduled.sort((a, b) => (a.runAt ?? '').localeCompare(b.runAt ?? ''));
  const hidden = waiting.slice(limits.waiting);
  const leasesShown = limits.leases ?? LEASES_SHOWN;
  const moreLeases = leases.slice(leasesShown);
  return {
    user,
    waiting: waiting.slice(0, limits.waiting),
    moreWaiting: { count: hidden.length, channels: [...new Set(hidden.map((r) => r.channel))] },
    mine,
    scheduled: scheduled.slice(0, limits.scheduled),
    moreScheduled: Math.max(0, scheduled.length - limits.scheduled),
    leases: leases.slice(0, leasesShown),
    moreLeases: { count: moreLeases.length, channels: [...new Set(moreLeases.map((r) => r.channel))] },
  };
}

/**
 * The Slack users a change of `request` concerns: its requester and the approvers that are people (not groups),
 * those it was escalated to included once it was.
 */
export function peopleConcerned(request: CloudRequest): string[] {
  return [...new Set([request.requester, ...currentApprovers(request)])].filter((id) =>
    /^[UW][A-Z0-9]+$/.test(id),
  );
}

/** The user groups among the approvers of `request` now: their members' homes are refreshed too. */
export function groupsConcerned(request: CloudRequest): string[] {
  return currentApprovers(request).filter(isGroup);
}
