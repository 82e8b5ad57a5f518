import type { Cluster, Redis } from 'ioredis';
import type { Logger } from '../observability/logger.ts';
import type { DueItem, DueKind } from '../requests/outbox.ts';
import { LuaScript } from '../requests/store/lua.ts';

/*
 * Due times: reminders, escalations and the ends of freezes in ONE sorted set, so that nothing costs
 * anything until it is due, restarts lose nothing, and several processes act on each item once.
 */

/** The set's key: `${prefix}:due`, members `${kind}:${requestId}`, scored by when they fall due (ms). */
export function dueKey(prefix: string): string {
  return `${prefix}:due`;
}

const KINDS: readonly DueKind[] = ['remind', 'escalate', 'freeze-end', 'lease'];

function member(item: DueItem): string {
  return `${item.kind}:${item.requestId}`;
}

function parseMember(text: string): DueItem | undefined {
  const at = text.indexOf(':');
  const kind = text.slice(0, at) as DueKind;
  if (at < 0 || !KINDS.includes(kind)) return undefined;
  return { kind, requestId: text.slice(at + 1) };
}

/**
 * Takes up to ARGV[3] items due by ARGV[1] (ms): each is moved to ARGV[2] (now + the lease), so another process
 * does not take it while this one acts; one that is not marked done by then is due again. Returns member, score
 * pairs. KEYS: the set.
 */
const CLAIM = new LuaScript(`
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, m in ipairs(due) do
  redis.call('ZADD', KEYS[1], 'XX', ARGV[2], m)
  table.insert(out, m)
end
return out
`);

/** Removes a claimed item unless it was scheduled again meanwhile (its score is no longer the claim's). */
const DONE = new LuaScript(`
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) == tonumber(ARGV[2]) then return redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0
`);

/** The due times of every request: add, drop, and take what is due (once across several processes). */
export class DueTimes {
  private readonly key: string;

  constructor(
    private readonly redis: Redis | Cluster,
    prefix: string,
  ) {
    this.key = dueKey(prefix);
  }

  /** Sets when `item` falls due (a later call moves it). */
  async set(item: DueItem, at: Date): Promise<void> {
    await this.redis.zadd(this.key, at.getTime(), member(item));
  }

  async drop(items: DueItem[]): Promise<void> {
    if (items.length > 0) await this.redis.zrem(this.key, ...items.map(member));
  }

  /** When `item` falls due, or undefined when it is not scheduled. */
  async when(item: DueItem): Promise<Date | undefined> {
    const score = await this.redis.zscore(this.key, member(item));
    return score === null ? undefined : new Date(Number(score));
  }

  /** The earliest due time, or undefined when nothing is scheduled. */
  async earliest(): Promise<Date | undefined> {
    const [, score] = await this.redis.zrange(this.key, 0, 0, 'WITHSCORES');
    return score === undefined ? undefined : new Date(Number(score));
  }

  /** Takes what is due at `now`, for `leaseMs`; hand each back with {@link done} once acted on. */
  async claim(now: Date, leaseMs: number, limit: number): Promise<{ item: DueItem; token: number }[]> {
    const token = now.getTime() + leaseMs;
    const members = (await CLAIM.run(this.redis, [this.key], [now.getTime(), token, limit])) as string[];
    const out: { item: DueItem; token: number }[] = [];
    for (const m of members) {
      const item = parseMember(m);
      // Something this version does not know: left for the version that wrote it, once its lease ends.
      if (item) out.push({ item, token });
    }
    return out;
  }

  async done(item: DueItem, token: number): Promise<void> {
    await DONE.run(this.redis, [this.key], [member(item), token]);
  }
}

/**
 * What to do when an item falls due; a throw leaves it to be tried again after the lease. A kind without a handler
 * here is left, like an unknown one, for a process that has one.
 */
export type DueHandlers = Partial<Record<DueKind, (requestId: string) => Promise<void>>>;

/** How often the loop looks, and how long a claim holds; tests use a fast one. */
export interface DuePolicy {
  /** The longest wait between two looks (the clock may be moved, so the loop never sleeps longer). */
  pollMs: number;
  /** How long a claimed item is held before another process may take it again. */
  leaseMs: number;
  /** Items taken per look. */
  batch: number;
}

export const DUE_POLICY: DuePolicy = { pollMs: 5_000, leaseMs: 60_000, batch: 50 };

/**
 * The scheduler of due times: one cheap look (ZRANGEBYSCORE) every `pollMs`, nothing more while nothing is due.
 * Several processes may run it: a claim moves an item out of the others' reach, so each is acted on once.
 */
export function startDueScheduler(
  deps: { due: DueTimes; handlers: DueHandlers; now: () => Date; logger: Logger },
  policy: DuePolicy = DUE_POLICY,
): { stop(): Promise<void>; tick(): Promise<number> } {
  let stopped = false;
  let running: Promise<number> | undefined;
  let timer: NodeJS.Timeout | undefined;

  const tick = async (): Promise<number> => {
    const claimed = await deps.due.claim(deps.now(), policy.leaseMs, policy.batch);
    for (const { item, token } of claimed) {
      const handle = deps.handlers[item.kind];
      if (!handle) continue;
      try {
        await handle(item.requestId);
        await deps.due.done(item, token);
      } catch (error) {
        deps.logger.warn(
          { err: error, kind: item.kind, requestId: item.requestId },
          'a due item could not be handled; it is tried again after its lease',
        );
      }
    }
    return claimed.length;
  };
  const loop = () => {
    if (stopped) return;
    running = tick().catch((error: unknown) => {
      deps.logger.warn({ err: error }, 'due times could not be read; the next look tries again');
      return 0;
    });
    void running.then((taken) => {
      running = undefined;
      // A full batch may mean more is due: look again at once.
      if (!stopped) timer = setTimeout(loop, taken >= policy.batch ? 0 : policy.pollMs);
    });
  };
  loop();
  return {
    tick,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
