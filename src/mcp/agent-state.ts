import { randomUUID } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { LuaScript } from '../requests/lua.ts';
import { requestKeys } from '../requests/store.ts';

const HOUR_MS = 3_600_000;

/**
 * A sliding hour of asks per agent: drops asks older than the window, refuses when `limit` remain, else records
 * this one. KEYS: the agent's asks. ARGV: now ms, window ms, limit, member. Returns {1} or {0, oldest ask's ms}.
 */
const TAKE_ASK = new LuaScript(`
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, oldest[2]}
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], window)
return {1}
`);

/** Key names of the agents' state under one prefix. */
export function agentKeys(prefix: string) {
  return {
    /** Names of the agents `cloudops agents disable` stopped. */
    disabled: `${prefix}:agents:disabled`,
    /** An agent's asks of the last hour, scored by when (its rate limit). */
    asks: (name: string) => `${prefix}:agent-asks:${name.toLowerCase()}`,
  };
}

/** An agent's ask refused by its rate limit: it may ask again at `retryAt`. */
export interface RateLimited {
  ok: false;
  retryAt: Date;
}

/**
 * What Redis holds about agents besides the policy: which are disabled (`cloudops agents disable|enable`, audited)
 * and how many requests each made in the last hour.
 */
export class AgentControls {
  private readonly keys: ReturnType<typeof agentKeys>;
  private readonly audit: string;

  constructor(
    private readonly redis: Redis | Cluster,
    prefix: string,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.keys = agentKeys(prefix);
    this.audit = requestKeys(prefix).audit;
  }

  async isDisabled(name: string): Promise<boolean> {
    return (await this.redis.sismember(this.keys.disabled, name.toLowerCase())) === 1;
  }

  async disabled(): Promise<string[]> {
    return this.redis.smembers(this.keys.disabled);
  }

  /**
   * Disables or enables an agent at once, with an audit entry naming who did it; false when it already was. The
   * change and its entry go in one MULTI.
   */
  async setDisabled(name: string, disabled: boolean, actor: string): Promise<boolean> {
    const key = name.toLowerCase();
    const detail = `${disabled ? 'disabled' : 'enabled'} agent ${name}`;
    const results = await this.redis
      .multi()
      .call(disabled ? 'SADD' : 'SREM', this.keys.disabled, key)
      .xadd(this.audit, '*', 'requestId', '', 'state', 'agent', 'actor', actor, 'detail', detail)
      .exec();
    const changed = results?.[0]?.[1] === 1;
    // An entry for a change that did not happen would mislead: it is removed again.
    const id = results?.[1]?.[1];
    if (!changed && typeof id === 'string') await this.redis.xdel(this.audit, id);
    return changed;
  }

  /** Counts one request of `name` against `perHour`; refused with the time it may ask again when the hour is full. */
  async takeAsk(name: string, perHour: number): Promise<{ ok: true } | RateLimited> {
    const nowMs = this.now().getTime();
    const answer = (await TAKE_ASK.run(
      this.redis,
      [this.keys.asks(name)],
      [nowMs, HOUR_MS, perHour, `${nowMs}-${randomUUID()}`],
    )) as [number, string?];
    if (answer[0] === 1) return { ok: true };
    return { ok: false, retryAt: new Date(Number(answer[1] ?? nowMs) + HOUR_MS) };
  }
}
