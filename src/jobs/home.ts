import type { Redis } from 'ioredis';
import type { ApprovalPolicy, UserGroups } from '../requests/approvers.ts';
import { groupsConcerned, type Inbox, peopleConcerned, readInbox } from '../requests/inbox.ts';
import { LuaScript } from '../requests/lua.ts';
import type { RequestStore } from '../requests/store.ts';
import type { CloudRequest } from '../requests/types.ts';
import type { SlackApi } from '../slack-api/client.ts';
import { type FollowUpQueueDeps, slackCallFailed, startFollowUpQueue } from './follow-up-queue.ts';
import type { HomeDigest, HomeRenderer } from './renderers.ts';

export const HOME_QUEUE = 'home';
/** Changes to one person's requests within this window make one views.publish. */
export const HOME_COALESCE_MS = 1_000;
/**
 * views.publish is Tier 4 ("100+ per minute" per workspace): refreshes stay at 100 a minute, in short windows so a
 * burst waits seconds, not a minute.
 */
export const HOME_RATE = Object.freeze({ max: 20, duration: 12_000 });
/** Only people who opened their App Home within this time get it refreshed when their requests change. */
const HOME_SEEN_TTL_S = 30 * 24 * 3600;
/** People marked due by one script call (a user group may have thousands of members). */
const MARK_SLICE = 200;
/** A refresh marked due but whose job was lost (a crash between two writes) is marked anew after this. */
const PENDING_TTL_MS = 60_000;

/**
 * For each (seen, pending) key pair: when the person has opened their home and no refresh is due yet, marks one
 * due. Returns the 1-based indexes of the pairs marked, so each person gets at most one waiting job.
 */
const MARK_DUE = new LuaScript(`
local due = {}
for i = 1, #KEYS, 2 do
  if redis.call('EXISTS', KEYS[i]) == 1 and redis.call('SET', KEYS[i + 1], '1', 'NX', 'PX', ARGV[1]) then
    table.insert(due, (i + 1) / 2)
  end
end
return due
`);

const homeKeys = (prefix: string) => ({
  seen: (user: string) => `${prefix}:home-seen:${user}`,
  pending: (user: string) => `${prefix}:home-pending:${user}`,
});

export interface HomeDeps {
  store: RequestStore;
  approvals: ApprovalPolicy;
  renderer: HomeRenderer;
  now: () => Date;
  /** A channel's pricing digest subscription, if it has one. */
  digestOf?: (channel: string) => Promise<Omit<HomeDigest, 'channel'> | undefined>;
  /** The user groups a person belongs to: what waits for those groups is on their home too. */
  groupsOf?: (user: string) => Promise<string[]>;
}

/** The digests of the channels a person's requests live in: the channels their page names. */
async function digestsFor(deps: HomeDeps, inbox: Inbox): Promise<HomeDigest[]> {
  const digestOf = deps.digestOf;
  if (!digestOf) return [];
  const channels = new Set(
    [...inbox.waiting, ...(inbox.leases ?? []), ...inbox.scheduled, ...inbox.mine]
      .map((r) => r.channel)
      .concat(inbox.moreWaiting.channels),
  );
  const found = await Promise.all(
    [...channels].map(async (channel) => {
      const digest = await digestOf(channel);
      return digest ? { channel, ...digest } : undefined;
    }),
  );
  return found.filter((d): d is HomeDigest => d !== undefined);
}

/** Builds `user`'s App Home from their inbox and publishes it; returns how many blocks it has. */
export async function publishHome(
  deps: HomeDeps,
  slack: Pick<SlackApi, 'views'>,
  user: string,
): Promise<number> {
  const inbox = await readInbox(deps, user);
  const view = deps.renderer.home(inbox, deps.now(), await digestsFor(deps, inbox));
  await slack.views.publish({ user_id: user, view });
  return view.blocks.length;
}

/** Remembers that `user` looks at their App Home, so changes to their requests refresh it. */
export async function markHomeSeen(redis: Redis, prefix: string, user: string): Promise<void> {
  await redis.set(homeKeys(prefix).seen(user), '1', 'EX', HOME_SEEN_TTL_S);
}

export interface HomeRefresh {
  /** `request` changed: the homes of the people it concerns are published again, once per burst. */
  changed(request: CloudRequest): Promise<void>;
  close(): Promise<void>;
}

export interface HomeWorkerDeps extends HomeDeps, FollowUpQueueDeps {
  slack: Pick<SlackApi, 'views'>;
  /** Members of the user groups a request names (from the cache): their homes are refreshed too. */
  groups?: UserGroups;
  /** Coalescing window; tests shorten it. */
  coalesceMs?: number;
}

/**
 * The refresh of App Homes when requests change: a change marks each concerned person's refresh due (once while one
 * is due) and adds a job delayed by the coalescing window; the worker clears the mark before reading, so a change
 * that lands while it publishes marks a new refresh rather than being lost. Publishes stay within Slack's rate.
 */
export function startHomeRefresh(deps: HomeWorkerDeps): HomeRefresh {
  const keys = homeKeys(deps.prefix);
  const coalesceMs = deps.coalesceMs ?? HOME_COALESCE_MS;
  /** The people named and the members of the groups named; only those who opened their home get a job. */
  const concerned = async (request: CloudRequest): Promise<string[]> => {
    const groups = deps.groups;
    const named = groupsConcerned(request);
    if (!groups || named.length === 0) return peopleConcerned(request);
    const members = await Promise.all(named.map(async (group) => (await groups.members(group)) ?? []));
    return [...new Set([...peopleConcerned(request), ...members.flat()])];
  };
  const queue = startFollowUpQueue<{ user: string }>(
    HOME_QUEUE,
    deps,
    {
      jobs: { attempts: 8, removeOnComplete: true, removeOnFail: { age: 24 * 3600, count: 1000 } },
      limiter: HOME_RATE,
    },
    async (job) => {
      const { user } = job.data;
      await deps.connection.del(keys.pending(user));
      try {
        return await publishHome(deps, deps.slack, user);
      } catch (error) {
        // A home Slack will not take (the Home tab off, a user gone) is not retried; outages and rate limits are.
        throw await slackCallFailed('views.publish', error);
      }
    },
  );
  return {
    async changed(request) {
      const everyone = await concerned(request);
      // A large group is marked in slices, so one script never holds Redis for long.
      for (let start = 0; start < everyone.length; start += MARK_SLICE) {
        const people = everyone.slice(start, start + MARK_SLICE);
        const due = (await MARK_DUE.run(
          deps.connection,
          people.flatMap((user) => [keys.seen(user), keys.pending(user)]),
          [PENDING_TTL_MS],
        )) as number[];
        await Promise.all(due.map((i) => queue.add({ user: people[i - 1] ?? '' }, { delay: coalesceMs })));
      }
    },
    close: () => queue.close(),
  };
}
