import { randomUUID } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { AuditAppender, type AuditContext, NO_AUDIT_CONTEXT } from '../requests/audit/append.ts';
import { standaloneEntry } from '../requests/audit/entry.ts';
import type { AuditRequester } from '../requests/model/audit-record.ts';
import { LuaScript } from '../requests/store/lua.ts';

const HOUR_MS = 3_600_000;
const MINUTE_MS = 60_000;

/**
 * A sliding window per agent (its asks of the hour, its reads of the minute): drops entries older than the window,
 * refuses when `limit` are there, else records this one. KEYS: the agent's entries. ARGV: now ms, window ms, limit,
 * member. Returns {1} or {0, oldest entry's ms}.
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

/**
 * Claims an ask's ledger entry: set when absent or still holding `stale`, else answers what it holds. KEYS: the
 * entry. ARGV: the value, its time to live in ms, the stale value ('' for none). Returns {1} or {0, current}.
 */
const CLAIM_ASK = new LuaScript(`
local current = redis.call('GET', KEYS[1])
if current == false or (ARGV[3] ~= '' and current == ARGV[3]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1}
end
return {0, current}
`);

/** Removes an ask's ledger entry only while it still holds `ARGV[1]` (an ask that made nothing). */
const DROP_ASK = new LuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`);

/** How long an ask being made holds its entry at most (a process dying mid-ask frees it then). */
const CLAIM_MS = 60_000;
/** How long an idempotency key answers with its request. */
const KEY_MS = 24 * HOUR_MS;
/** How long an identical ask finds the open request it matches (its state is read: an ended one no longer counts). */
const SAME_MS = 7 * 24 * HOUR_MS;

/** Key names of the agents' state under one prefix. */
export function agentKeys(prefix: string) {
  return {
    /** Names of the agents `cloudops agents disable` stopped. */
    disabled: `${prefix}:agents:disabled`,
    /** An agent's asks of the last hour, scored by when (its rate limit). */
    asks: (name: string) => `${prefix}:agent-asks:${name.toLowerCase()}`,
    /** An agent's reads of the last minute, scored by when (its read rate). */
    reads: (name: string) => `${prefix}:agent-reads:${name.toLowerCase()}`,
    /** The request an agent's idempotency key made, with the ask's fingerprint. */
    keyed: (name: string, key: string) => `${prefix}:agent-key:${name.toLowerCase()}:${key}`,
    /** The request an agent's ask with this fingerprint made (identical asks find it while it is open). */
    same: (name: string, fingerprint: string) => `${prefix}:agent-same:${name.toLowerCase()}:${fingerprint}`,
  };
}

/** An agent's ask refused by its rate limit: it may ask again at `retryAt`. */
export interface RateLimited {
  ok: false;
  retryAt: Date;
}

/** A place in an agent's window: `release` gives it back (an ask that made no request). */
export interface Taken {
  ok: true;
  release: () => Promise<void>;
}

/**
 * Where an ask stands in the ledger of an agent's asks:
 * - `claimed`: nobody made it; `made(id)` records the request, `dropped()` frees the entry when nothing was made;
 * - `made`: a request with this fingerprint (`same` says whether the idempotency key's ask was this one) exists;
 * - `busy`: the same ask is being made right now.
 */
export type AskClaim =
  | { kind: 'claimed'; made: (requestId: string) => Promise<void>; dropped: () => Promise<void> }
  | { kind: 'made'; requestId: string; same: boolean; retry: () => Promise<AskClaim> }
  | { kind: 'busy' };

/**
 * What Redis holds about agents besides the policy: which are disabled (`cloudops agents disable|enable`, audited)
 * and how many requests each made in the last hour.
 */
export class AgentControls {
  private readonly keys: ReturnType<typeof agentKeys>;
  private readonly audit: AuditAppender;

  constructor(
    private readonly redis: Redis | Cluster,
    prefix: string,
    private readonly now: () => Date = () => new Date(),
    audit: AuditContext = NO_AUDIT_CONTEXT,
  ) {
    this.keys = agentKeys(prefix);
    this.audit = new AuditAppender(redis, prefix, audit, now);
  }

  async isDisabled(name: string): Promise<boolean> {
    return (await this.redis.sismember(this.keys.disabled, name.toLowerCase())) === 1;
  }

  async disabled(): Promise<string[]> {
    return this.redis.smembers(this.keys.disabled);
  }

  /**
   * Disables or enables an agent at once, with an audit entry naming who did it (`requester`: the operator's OS user
   * and host); false when it already was, and then nothing is audited.
   */
  async setDisabled(
    name: string,
    disabled: boolean,
    actor: string,
    requester?: AuditRequester,
  ): Promise<boolean> {
    const key = name.toLowerCase();
    const details = `${disabled ? 'disabled' : 'enabled'} agent ${name}`;
    const changed =
      (disabled
        ? await this.redis.sadd(this.keys.disabled, key)
        : await this.redis.srem(this.keys.disabled, key)) === 1;
    if (changed)
      await this.audit.append([
        standaloneEntry(
          { act: 'agent', actor, details, ...(requester ? { requester } : {}) },
          this.now().toISOString(),
          this.audit.policyVersion(),
        ),
      ]);
    return changed;
  }

  /**
   * Counts one request of `name` against `perHour`; refused with the time it may ask again when the hour is full.
   * An ask refused afterwards releases its place: only requests made count.
   */
  takeAsk(name: string, perHour: number): Promise<Taken | RateLimited> {
    return this.take(this.keys.asks(name), perHour, HOUR_MS);
  }

  /** Counts one read of `name` against `perMinute`; refused with the time it may read again when the minute is full. */
  takeRead(name: string, perMinute: number): Promise<Taken | RateLimited> {
    return this.take(this.keys.reads(name), perMinute, MINUTE_MS);
  }

  private async take(key: string, limit: number, windowMs: number): Promise<Taken | RateLimited> {
    const nowMs = this.now().getTime();
    const member = `${nowMs}-${randomUUID()}`;
    const answer = (await TAKE_ASK.run(this.redis, [key], [nowMs, windowMs, limit, member])) as [
      number,
      string?,
    ];
    if (answer[0] === 1)
      return {
        ok: true,
        release: async () => {
          await this.redis.zrem(key, member);
        },
      };
    return { ok: false, retryAt: new Date(Number(answer[1] ?? nowMs) + windowMs) };
  }

  /**
   * Claims the ask whose change is `fingerprint` for agent `name`: under its idempotency `key` when it gave one (that
   * key answers with its request for a day), else under the fingerprint itself (an identical ask finds the request;
   * the caller calls `retry` when that request has ended, so a new identical ask is made).
   */
  async claimAsk(name: string, key: string | undefined, fingerprint: string): Promise<AskClaim> {
    const entry = key === undefined ? this.keys.same(name, fingerprint) : this.keys.keyed(name, key);
    const keepMs = key === undefined ? SAME_MS : KEY_MS;
    const claim = async (stale: string): Promise<AskClaim> => {
      const placeholder = `${fingerprint}|`;
      const answer = (await CLAIM_ASK.run(this.redis, [entry], [placeholder, CLAIM_MS, stale])) as [
        number,
        string?,
      ];
      if (answer[0] === 1)
        return {
          kind: 'claimed',
          made: async (requestId) => {
            await this.redis.set(entry, `${fingerprint}|${requestId}`, 'PX', keepMs);
          },
          dropped: async () => {
            await DROP_ASK.run(this.redis, [entry], [placeholder]);
          },
        };
      const current = answer[1] ?? '';
      const [held = '', requestId = ''] = current.split('|');
      if (requestId === '') return { kind: 'busy' };
      return { kind: 'made', requestId, same: held === fingerprint, retry: () => claim(current) };
    };
    return claim('');
  }
}
