import { createHash } from 'node:crypto';
import { type JobsOptions, Queue } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import { redisConnectionLog } from '../observability/connection-log.ts';
import type { Logger } from '../observability/logger.ts';
import type { ApprovalPolicy, UserGroups } from '../requests/approval/approvers.ts';
import { groupsConcerned, type Inbox, peopleConcerned, readInbox } from '../requests/inbox.ts';
import type { CloudRequest } from '../requests/model/types.ts';
import { LuaScript } from '../requests/store/lua.ts';
import type { RequestStore } from '../requests/store/store.ts';
import type { SlackApi } from '../slack-api/client.ts';
import { type FollowUpQueueDeps, slackCallFailed, startFollowUpQueue } from './follow-up-queue.ts';
import type { HomeDigest, HomeRenderer, HomeView } from './renderers.ts';
import { slackFailure } from './slack-failure.ts';

export const HOME_QUEUE = 'home';
/** Changes to one person's requests within this window make one views.publish. */
export const HOME_COALESCE_MS = 1_000;
/** At most `max` views.publish calls per `duration` ms, in every process together. */
export interface HomeRate {
  max: number;
  duration: number;
}
/**
 * views.publish is Tier 4 ("100+ per minute" per workspace): publishes, on opening and refreshes together, stay at
 * 100 a minute, in short windows so a burst waits seconds, not a minute.
 */
export const HOME_RATE: HomeRate = Object.freeze({ max: 20, duration: 12_000 });
/**
 * Opens of the Home tab by one person within this window that would publish the same page as the first publish
 * nothing (someone clicking the tab again and again); a page that changed meanwhile is published.
 */
export const HOME_OPEN_COALESCE_MS = 2_000;
/** The home queue's jobs, added by the refresh and by opens handed over: retried, removed once done. */
const HOME_JOBS: JobsOptions = {
  attempts: 8,
  backoff: { type: 'cloudops' },
  removeOnComplete: true,
  removeOnFail: { age: 24 * 3600, count: 1000 },
};
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

/**
 * Takes one views.publish from the budget the home queue's BullMQ limiter counts in (the same key, counted the same
 * way: a counter that expires `duration` after the window's first publish), so opens and refreshes share it.
 * KEYS: the home queue's limiter key. ARGV: max, duration ms. Returns 0 when taken, else ms until the window ends.
 */
const TAKE_PUBLISH = new LuaScript(`
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used >= tonumber(ARGV[1]) then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then return ttl end
  redis.call('DEL', KEYS[1])
end
if redis.call('INCR', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`);

const homeKeys = (prefix: string) => ({
  seen: (user: string) => `${prefix}:home-seen:${user}`,
  pending: (user: string) => `${prefix}:home-pending:${user}`,
  /** The fingerprint of the page last published (or queued) when the person opened their home. */
  shown: (user: string) => `${prefix}:home-shown:${user}`,
});

/**
 * Has one refresh of `user`'s home queued unless one already waits (the pending mark); `delay` ms from now. The
 * queue's limiter and retries then see it published, whatever Slack answers meanwhile.
 */
async function markAndQueue(
  redis: Redis | Cluster,
  keys: ReturnType<typeof homeKeys>,
  users: string[],
  add: (user: string) => Promise<unknown>,
): Promise<void> {
  const due = (await MARK_DUE.run(
    redis,
    users.flatMap((user) => [keys.seen(user), keys.pending(user)]),
    [PENDING_TTL_MS],
  )) as number[];
  await Promise.all(due.map((i) => add(users[i - 1] ?? '')));
}

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

/**
 * `user`'s App Home as it would be published now, and a fingerprint of what it shows: the requests as stored (each
 * write moves their version), the digests, and the minute (relative times on the page move with it).
 */
async function buildHome(deps: HomeDeps, user: string): Promise<{ view: HomeView; shows: string }> {
  const inbox = await readInbox(deps, user);
  const now = deps.now();
  const digests = await digestsFor(deps, inbox);
  const view = deps.renderer.home(inbox, now, digests);
  const minute = Math.floor(now.getTime() / 60_000);
  const shows = createHash('sha1')
    .update(JSON.stringify([inbox, digests, minute]))
    .digest('base64url');
  return { view, shows };
}

/** Builds `user`'s App Home from their inbox and publishes it; returns how many blocks it has. */
export async function publishHome(
  deps: HomeDeps,
  slack: Pick<SlackApi, 'views'>,
  user: string,
): Promise<number> {
  const { view } = await buildHome(deps, user);
  await slack.views.publish({ user_id: user, view });
  return view.blocks.length;
}

/** Remembers that `user` looks at their App Home, so changes to their requests refresh it. */
export async function markHomeSeen(redis: Redis | Cluster, prefix: string, user: string): Promise<void> {
  await redis.set(homeKeys(prefix).seen(user), '1', 'EX', HOME_SEEN_TTL_S);
}

export interface HomeRefresh {
  /** `request` changed: the homes of the people it concerns are published again, once per burst. */
  changed(request: CloudRequest): Promise<void>;
  close(): Promise<void>;
}

export interface HomeWorkerDeps extends HomeDeps, FollowUpQueueDeps {
  slack: Pick<SlackApi, 'views'>;
  /**
   * Where the refresh marks are written: a waiting connection without BullMQ's scripts (the workers' records one).
   * ioredis copies every script defined on a connection onto each auto-pipelined batch of it, about 65 on BullMQ's,
   * which made each mark cost more than its command. Default: `connection`.
   */
  records?: Redis | Cluster;
  /** Members of the user groups a request names (from the cache): their homes are refreshed too. */
  groups?: UserGroups;
  /** Coalescing window; tests shorten it. */
  coalesceMs?: number;
  /** The views.publish budget shared with the opens (default HOME_RATE). */
  rate?: HomeRate;
}

/**
 * The refresh of App Homes when requests change: a change marks each concerned person's refresh due (once while one
 * is due) and adds a job delayed by the coalescing window; the worker clears the mark before reading, so a change
 * that lands while it publishes marks a new refresh rather than being lost. Publishes stay within Slack's rate.
 */
export function startHomeRefresh(deps: HomeWorkerDeps): HomeRefresh {
  const keys = homeKeys(deps.prefix);
  const coalesceMs = deps.coalesceMs ?? HOME_COALESCE_MS;
  const marks = deps.records ?? deps.connection;
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
    { jobs: HOME_JOBS, limiter: deps.rate ?? HOME_RATE },
    async (job, control) => {
      const { user } = job.data;
      await marks.del(keys.pending(user));
      try {
        return await publishHome(deps, deps.slack, user);
      } catch (error) {
        // Slack's limit is the workspace's: no home is published until it lifts, and this one waits its turn again.
        const retryAfterMs = rateLimitedFor(error);
        if (retryAfterMs !== undefined) throw await control.pause(retryAfterMs);
        // A home Slack will not take (the Home tab off, a user gone) is not retried; outages are.
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
        await markAndQueue(marks, keys, people, (user) => queue.add({ user }, { delay: coalesceMs }));
      }
    },
    close: () => queue.close(),
  };
}

/** Slack's Retry-After in ms when `error` is its 429, else undefined. */
function rateLimitedFor(error: unknown): number | undefined {
  const failure = slackFailure(error);
  return failure?.verdict === 'retry' ? failure.retryAfterMs : undefined;
}

/** What became of one open of the Home tab. */
export type HomeOpenOutcome = 'published' | 'queued' | 'coalesced';

export interface HomeOpens {
  /**
   * `user` opened their Home tab: they are signed up for refreshes, and their page is published now when the budget
   * allows, else handed to the home queue (which waits for the budget, and for Slack's Retry-After after a 429).
   * An open that would publish the same page as the person's open just before (within HOME_OPEN_COALESCE_MS)
   * publishes nothing.
   */
  opened(user: string): Promise<HomeOpenOutcome>;
  close(): Promise<void>;
}

export interface HomeOpensDeps extends HomeDeps {
  /** Fails fast: the coalescing mark, the budget, the refresh sign-up. */
  redis: Redis | Cluster;
  /** The home queue's connection (BullMQ's), for handing a publish over. */
  connection: Redis | Cluster;
  prefix: string;
  slack: Pick<SlackApi, 'views'>;
  logger: Logger;
  /** The views.publish budget shared with the refresh queue (default HOME_RATE); must be the workers' too. */
  rate?: HomeRate;
  /** 0: every open publishes (a bench measuring the page's cost). */
  coalesceMs?: number;
}

/**
 * The publishes on opening the Home tab, within the same views.publish budget as the refresh queue (the queue's
 * limiter key): a burst of opens is published as fast as the budget allows and the rest queued, never dropped.
 */
export function createHomeOpens(deps: HomeOpensDeps): HomeOpens {
  const keys = homeKeys(deps.prefix);
  const rate = deps.rate ?? HOME_RATE;
  const coalesceMs = deps.coalesceMs ?? HOME_OPEN_COALESCE_MS;
  // Only adds jobs: the worker role's refresh takes them.
  const queue = new Queue<{ user: string }>(HOME_QUEUE, {
    connection: deps.connection,
    prefix: deps.prefix,
    defaultJobOptions: HOME_JOBS,
  });
  queue.on('error', (error: Error) => redisConnectionLog(deps.logger).failure(error, { queue: HOME_QUEUE }));
  // BullMQ's own name for the key its limiter counts in.
  const limiterKey = queue.keys.limiter ?? `${deps.prefix}:${HOME_QUEUE}:limiter`;
  const handOver = (user: string) =>
    markAndQueue(deps.redis, keys, [user], (who) => queue.add(HOME_QUEUE, { user: who }));
  return {
    async opened(user) {
      // Signed up before the page is read: a change landing meanwhile refreshes it through the queue.
      await markHomeSeen(deps.redis, deps.prefix, user);
      const { view, shows } = await buildHome(deps, user);
      // The same page published (or queued) on an open moments ago stands: a burst of opens makes one publish.
      if (coalesceMs > 0) {
        const before = await deps.redis.set(keys.shown(user), shows, 'PX', coalesceMs, 'GET');
        if (before === shows) return 'coalesced';
      }
      const wait = Number(await TAKE_PUBLISH.run(deps.redis, [limiterKey], [rate.max, rate.duration]));
      if (wait > 0) {
        await handOver(user);
        return 'queued';
      }
      try {
        await deps.slack.views.publish({ user_id: user, view });
        return 'published';
      } catch (error) {
        const failure = slackFailure(error);
        if (failure?.verdict !== 'retry') throw error;
        // A 429 holds back every publish (the queue's too) for Retry-After; this one waits in the queue meanwhile.
        if (failure.retryAfterMs !== undefined) await queue.rateLimit(failure.retryAfterMs);
        await handOver(user);
        return 'queued';
      }
    },
    close: () => queue.close(),
  };
}
