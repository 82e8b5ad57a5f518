import { createHash, randomInt } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { compareStreamIds, countAudit, oldestUnshipped } from './audit.ts';
import { LuaScript } from './lua.ts';
import {
  ALLOWED_TRANSITIONS,
  type AuditNote,
  type CloudRequest,
  FINAL_STATES,
  type NewRequest,
  type RequestState,
  revisionOf,
} from './types.ts';
import type { VerifiedBy } from './verification.ts';
import { RECORD_VM_LUA, type VmFactsWrite } from './vm-facts.ts';

/** Crockford base32: no I, L, O or U, so an id read aloud or retyped is unambiguous. */
const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const CROCKFORD_LETTERS = CROCKFORD.slice(10);
/** How many request ids a channel's index keeps for `/cloud jobs`. */
const CHANNEL_INDEX_KEEP = 1000;
/** How many of a person's own requests their index keeps (the App Home shows the most recent). */
export const REQUESTER_INDEX_KEEP = 100;
/** Compare-and-set rounds before giving up: only reached under pathological contention. */
const MAX_CAS_ROUNDS = 50;
/** Audit entries read per round trip when retention looks for entries of requests no longer stored. */
const AUDIT_SWEEP_PAGE = 500;

/** How long an ended request and its audit entries are kept when the caller does not say (policy `retention_days`). */
export const DEFAULT_RETENTION_DAYS = 90;
const DAY_MS = 86_400_000;

/**
 * A new request id such as 'R7K2M9QX': 8 Crockford base32 characters from a CSPRNG. The first is a letter so an
 * id never reads as a number (BullMQ refuses numeric custom job ids).
 */
export function newRequestId(): string {
  let id = CROCKFORD_LETTERS[randomInt(CROCKFORD_LETTERS.length)]!;
  for (let i = 1; i < 8; i++) id += CROCKFORD[randomInt(CROCKFORD.length)]!;
  return id;
}

/** A caller asked for an arrow the state machine does not have: a bug, not a race. */
export class IllegalTransitionError extends Error {
  override readonly name = 'IllegalTransitionError';
  readonly code = 'ILLEGAL_TRANSITION';
}

export type TransitionResult =
  | { ok: true; request: CloudRequest }
  | { ok: false; reason: 'not_found' | 'wrong_state'; request?: CloudRequest };

export interface TransitionInput {
  /** States the caller expects the request to be in; the move happens only from one of them. */
  from: RequestState[];
  to: RequestState;
  /** Slack user id, or 'cloudops' for the bot itself. */
  actor: string;
  /** Other fields to set in the same write (e.g. approvedBy, outcomes). */
  patch?: Partial<CloudRequest>;
  /** A short note for the audit log. */
  detail?: string;
  /** What the bot applied to the VM, recorded in the same script as the move (a success and its facts cannot part). */
  vmFacts?: VmFactsWrite;
}

/** One audit entry a write records. */
interface AuditWrite {
  state: RequestState | AuditNote;
  actor: string;
  detail?: string;
}

/**
 * What retention did about audit entries past `retention_days` that the audit export has not shipped: kept them
 * (the export is on) or removed them (it is off, but an earlier export left its group with entries unshipped).
 */
export type UnshippedAudit = { kept: number } | { dropped: number };

/** Fields no patch may set: they belong to the store. */
const PROTECTED = ['id', 'state', 'version', 'createdAt', 'updatedAt'] as const;

/**
 * Appends one audit entry whose stream id follows the application clock (ARGV nowMs) but never goes
 * backwards, so `since` filters match the entries' `at` even with an injected clock. The `at` field is stored only
 * when the id's time is not the entry's own (the clock went back): otherwise readers take it from the id, which
 * saves about a sixth of what a finished request keeps in Redis.
 */
const AUDIT_APPEND_LUA = `
local function audit_append(stream, now_ms, fields)
  local id = now_ms .. '-0'
  if redis.call('EXISTS', stream) == 1 then
    local info = redis.call('XINFO', 'STREAM', stream)
    local last
    for i = 1, #info, 2 do
      if info[i] == 'last-generated-id' then last = info[i + 1] end
    end
    local dash = string.find(last, '-', 1, true)
    local last_ms = tonumber(string.sub(last, 1, dash - 1))
    local last_seq = tonumber(string.sub(last, dash + 1))
    if tonumber(now_ms) <= last_ms then
      id = string.format('%d-%d', last_ms, last_seq + 1)
    end
  end
  if string.sub(id, 1, #tostring(now_ms) + 1) == now_ms .. '-' then
    local kept = {}
    for i = 1, #fields, 2 do
      if fields[i] ~= 'at' then
        table.insert(kept, fields[i])
        table.insert(kept, fields[i + 1])
      end
    end
    fields = kept
  end
  return redis.call('XADD', stream, id, unpack(fields))
end
`;

/**
 * Keeps the index of requests that must have an execute job (approved or queued) in step with the state, in the
 * same script as the write, so a crash between the two cannot leave a request out of it.
 */
const AWAITING_RUN_LUA = `
local function index_awaiting_run(key, state, now_ms, id)
  if state == 'approved' or state == 'queued' then
    redis.call('ZADD', key, now_ms, id)
  elseif state ~= '' then
    redis.call('ZREM', key, id)
  end
end
`;

/**
 * Keeps the retention index in step: a request that has ended and holds no open lease is scored by when that
 * began (the first such write counts: NX); any other request is not in it.
 */
const RETENTION_LUA = `
local function index_retention(key, ended_at, id)
  if ended_at ~= '' then
    redis.call('ZADD', key, 'NX', ended_at, id)
  else
    redis.call('ZREM', key, id)
  end
end
`;

/**
 * KEYS: request, channel index, audit, awaiting-run index, created index, requester's index, then the live-involvement
 * index of each person or group named (requester, approvers, those escalated to). ARGV: json, nowMs, id, initial state, actor, at, score, keep,
 * requester keep, detail of the 'created' entry ('' for none).
 */
const CREATE = new LuaScript(`${AUDIT_APPEND_LUA}${AWAITING_RUN_LUA}
if not redis.call('SET', KEYS[1], ARGV[1], 'NX') then return 0 end
redis.call('ZADD', KEYS[2], ARGV[7], ARGV[3])
redis.call('ZADD', KEYS[5], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[6], ARGV[7], ARGV[3])
redis.call('ZREMRANGEBYRANK', KEYS[6], 0, -(tonumber(ARGV[9]) + 1))
for i = 7, #KEYS do redis.call('ZADD', KEYS[i], ARGV[7], ARGV[3]) end
index_awaiting_run(KEYS[4], ARGV[4], ARGV[2], ARGV[3])
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[8]) + 1))
local created = {'requestId', ARGV[3], 'state', 'created', 'actor', ARGV[5], 'at', ARGV[6]}
if ARGV[10] ~= '' then
  table.insert(created, 'detail')
  table.insert(created, ARGV[10])
end
audit_append(KEYS[3], ARGV[2], created)
audit_append(KEYS[3], ARGV[2], {'requestId', ARGV[3], 'state', ARGV[4], 'actor', ARGV[5], 'at', ARGV[6]})
return 1
`);

/**
 * Compare-and-set on the request's stored JSON, compared by SHA-1 (what the writer decided on, byte for byte: a
 * caller's copy that differs in any way from the stored one is a conflict); on success also appends the audit entry and updates the awaiting-run,
 * retention, open-lease and involvement indexes, in the same script so a state change and its records cannot part.
 * With a VM facts record, what the bot applied to the VM is written too.
 * KEYS: request, audit, awaiting-run, retention, open leases, the VM's facts hash when there is a record, then the
 * live-involvement index of each person named.
 * ARGV: SHA-1 of the expected current json, new json, nowMs, id, audit label (the new state, a note such as
 * 'approval', or '' for no entry), actor, at, detail, ended-at ms ('' while the request is live or holds a lease), '1'
 * when the new state is final, the new state ('' when the state does not change), the lease's end in ms while it is
 * open ('closed' when it just closed, '' otherwise), '1' when a VM facts record follows (its args from ARGV[17]), then
 * a second audit entry written right after the first (label, actor, detail; '' for none: an approval that also
 * queues the request records both).
 */
const CAS = new LuaScript(`${AUDIT_APPEND_LUA}${AWAITING_RUN_LUA}${RETENTION_LUA}${RECORD_VM_LUA}
local current = redis.call('GET', KEYS[1])
if not current then return {'not_found'} end
if redis.sha1hex(current) ~= ARGV[1] then return {'conflict', current} end
redis.call('SET', KEYS[1], ARGV[2])
index_awaiting_run(KEYS[3], ARGV[11], ARGV[3], ARGV[4])
index_retention(KEYS[4], ARGV[9], ARGV[4])
if ARGV[12] == 'closed' then
  redis.call('ZREM', KEYS[5], ARGV[4])
elseif ARGV[12] ~= '' then
  redis.call('ZADD', KEYS[5], ARGV[12], ARGV[4])
end
local people = 6
if ARGV[13] == '1' then
  record_vm(KEYS[6], ARGV, 17)
  people = 7
end
if ARGV[10] == '1' then
  for i = people, #KEYS do redis.call('ZREM', KEYS[i], ARGV[4]) end
end
local function audit_entry(label, actor, detail)
  if label == '' then return end
  local fields = {'requestId', ARGV[4], 'state', label, 'actor', actor, 'at', ARGV[7]}
  if detail ~= '' then
    table.insert(fields, 'detail')
    table.insert(fields, detail)
  end
  audit_append(KEYS[2], ARGV[3], fields)
end
audit_entry(ARGV[5], ARGV[6], ARGV[8])
audit_entry(ARGV[14], ARGV[15], ARGV[16])
return {'ok'}
`);

/**
 * Removes one request that ended before the cutoff, unless a later write opened a lease (then it only leaves the
 * index). KEYS: request, retention, created, awaiting-run. ARGV: id, cutoff ms, channel-key prefix, requester-key
 * prefix, involvement-key prefix. Returns 1 when the request was removed.
 */
const REMOVE_EXPIRED = new LuaScript(`
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
local json = redis.call('GET', KEYS[1])
if not json then
  redis.call('ZREM', KEYS[3], ARGV[1])
  return 0
end
local request = cjson.decode(json)
if request.leaseOpen == true then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZREM', ARGV[3] .. request.channel, ARGV[1])
redis.call('ZREM', ARGV[4] .. request.requester, ARGV[1])
redis.call('ZREM', ARGV[5] .. request.requester, ARGV[1])
for _, person in ipairs(request.approvers or {}) do redis.call('ZREM', ARGV[5] .. person, ARGV[1]) end
for _, person in ipairs(request.escalateTo or {}) do redis.call('ZREM', ARGV[5] .. person, ARGV[1]) end
return 1
`);

/** Key names under one prefix, shared by the store, the audit log and the workers. */
export function requestKeys(prefix: string) {
  return {
    request: (id: string) => `${prefix}:req:${id}`,
    channel: (channel: string) => `${prefix}:channel:${channel}`,
    audit: `${prefix}:audit`,
    /** Requests that must have an execute job (approved or queued), scored by when they entered that state. */
    awaitingRun: `${prefix}:awaiting-run`,
    /** Ended requests without an open lease, scored by when they ended (or their lease closed). */
    retention: `${prefix}:retention`,
    /** Every stored request, scored by creation: the oldest bounds how much audit history must stay. */
    created: `${prefix}:created`,
    /** Requests whose lease is open, scored by when the lease ends. */
    leases: `${prefix}:leases`,
    /** A person's own most recent requests, scored by creation (the App Home). */
    requestedBy: (person: string) => `${prefix}:requested-by:${person}`,
    /**
     * Requests not yet final that name a person or a user group (requester, approver, escalated to), scored by
     * creation: what the App Home and its refresh read instead of scanning all requests. Removed when the request
     * reaches a final state.
     */
    involving: (person: string) => `${prefix}:involving:${person}`,
  };
}

/**
 * Requests in Redis: one JSON value per request, an index per channel, and every state change in the audit
 * stream. Every write is a compare-and-set on the stored value (its `version` moves with each), so concurrent clicks
 * and replays change a request once.
 */
export class RequestStore {
  private readonly keys: ReturnType<typeof requestKeys>;
  private readonly now: () => Date;
  private readonly retentionMs: number;
  private readonly channelPrefix: string;
  private readonly requestedByPrefix: string;
  private readonly involvingPrefix: string;
  private readonly exportsAudit: boolean;

  constructor(
    private readonly redis: Redis | Cluster,
    options: {
      prefix: string;
      now?: () => Date;
      retentionDays?: number;
      /** The audit export is on (AUDIT_WEBHOOK_URL): retention keeps every audit entry it has not shipped. */
      exportsAudit?: boolean;
    },
  ) {
    this.exportsAudit = options.exportsAudit ?? false;
    this.keys = requestKeys(options.prefix);
    this.now = options.now ?? (() => new Date());
    this.retentionMs = (options.retentionDays ?? DEFAULT_RETENTION_DAYS) * DAY_MS;
    this.channelPrefix = this.keys.channel('');
    this.requestedByPrefix = this.keys.requestedBy('');
    this.involvingPrefix = this.keys.involving('');
  }

  /** Stores a new request with a fresh id; audits 'created' (with `createdDetail`, e.g. the rule applied) and its initial state. */
  async create(input: NewRequest, actor: string, createdDetail?: string): Promise<CloudRequest> {
    const at = this.now();
    for (;;) {
      const request: CloudRequest = {
        ...input,
        id: newRequestId(),
        version: 1,
        revision: 1,
        createdAt: at.toISOString(),
        updatedAt: at.toISOString(),
        nextStep: 0,
        outcomes: [],
      };
      const created = await CREATE.run(
        this.redis,
        [
          this.keys.request(request.id),
          this.keys.channel(request.channel),
          this.keys.audit,
          this.keys.awaitingRun,
          this.keys.created,
          this.keys.requestedBy(request.requester),
          ...peopleOf(request).map(this.keys.involving),
        ],
        [
          JSON.stringify(request),
          at.getTime(),
          request.id,
          request.state,
          actor,
          request.createdAt,
          at.getTime(),
          CHANNEL_INDEX_KEEP,
          REQUESTER_INDEX_KEEP,
          createdDetail ?? '',
        ],
      );
      // A collision of two random ids is astronomically rare; draw again rather than overwrite.
      if (created === 1) return request;
    }
  }

  /** The request, or undefined when there is none with this id. */
  async get(id: string): Promise<CloudRequest | undefined> {
    const json = await this.redis.get(this.keys.request(id));
    return json === null ? undefined : (JSON.parse(json) as CloudRequest);
  }

  /**
   * Moves a request from one of `from` to `to`, with `patch`, and audits it; exactly one of several concurrent
   * callers wins. Throws {@link IllegalTransitionError} when an arrow from→to is not in the state machine.
   * `known`: the request as the caller last read or wrote it, so the first round trip is the compare-and-set itself
   * (see {@link casLoop}).
   */
  async transition(id: string, input: TransitionInput, known?: CloudRequest): Promise<TransitionResult> {
    for (const from of input.from) {
      if (!ALLOWED_TRANSITIONS[from].includes(input.to)) {
        throw new IllegalTransitionError(`a request cannot move from ${from} to ${input.to}`);
      }
    }
    return this.casLoop(
      id,
      (current) => {
        if (!input.from.includes(current.state)) return undefined;
        return {
          next: { ...current, ...stripProtected(input.patch), state: input.to },
          audit: { state: input.to, actor: input.actor, detail: input.detail },
        };
      },
      known,
      input.vmFacts,
    );
  }

  /**
   * Counts one approval by `user` of a pending request, atomically: each user once, and the approval that reaches
   * `requiredApprovals` moves it to approved (exactly one of several concurrent approvals does). `duplicate`: this
   * user's approval was already counted. `known` as for {@link transition}.
   *
   * A request that needs verified approvals counts only one `verified` by a method it allows (`unverified`
   * otherwise), and, given `revision`, only while the request is at that revision (`changed`): the same
   * compare-and-set as a plain approval, so the count, freezes and concurrent clicks behave alike.
   */
  async approve(
    id: string,
    user: string,
    known?: CloudRequest,
    options: { queue?: boolean; verified?: VerifiedBy; revision?: number } = {},
  ): Promise<
    TransitionResult | { ok: false; reason: 'duplicate' | 'unverified' | 'changed'; request: CloudRequest }
  > {
    let refused: { reason: 'duplicate' | 'unverified' | 'changed'; request: CloudRequest } | undefined;
    const at = this.now().toISOString();
    const { verified } = options;
    const result = await this.casLoop(
      id,
      (current) => {
        refused = undefined;
        if (current.state !== 'pending') return undefined;
        const approvals = current.approvals ?? [];
        if (approvals.some((a) => a.user === user)) {
          refused = { reason: 'duplicate', request: current };
          return undefined;
        }
        if (current.verify && !(verified && current.verify.includes(verified.method))) {
          refused = { reason: 'unverified', request: current };
          return undefined;
        }
        if (options.revision !== undefined && options.revision !== revisionOf(current)) {
          refused = { reason: 'changed', request: current };
          return undefined;
        }
        const counted = [...approvals, verified ? { user, at, verified } : { user, at }];
        const needed = Math.max(1, current.requiredApprovals ?? 1);
        const reached = counted.length >= needed;
        // The approval that completes the count also queues the request when asked: one decision, two entries.
        const queued = reached && options.queue === true;
        return {
          next: {
            ...current,
            approvals: counted,
            ...(reached
              ? { state: queued ? ('queued' as const) : ('approved' as const), approvedBy: user }
              : {}),
          },
          audit: {
            state: reached ? 'approved' : 'approval',
            actor: user,
            detail: `approval ${counted.length} of ${needed}${verified ? `, ${verifiedDetail(verified)}` : ''}`,
          },
          ...(queued ? { alsoAudit: { state: 'queued' as const, actor: 'cloudops' } } : {}),
        };
      },
      known,
    );
    if (refused) return { ok: false, ...refused };
    return result;
  }

  /**
   * Sets fields that are not the state and records why in the audit log (a reminder, an escalation), with the same
   * compare-and-set; `when` decides on the current request whether it still applies (undefined: nothing written).
   */
  async note(
    id: string,
    entry: { note: AuditNote; actor: string; detail?: string },
    when: (current: CloudRequest) => Partial<CloudRequest> | undefined,
  ): Promise<TransitionResult> {
    return this.casLoop(id, (current) => {
      const patch = when(current);
      if (!patch) return undefined;
      return {
        next: { ...current, ...stripProtected(patch) },
        audit: { state: entry.note, actor: entry.actor, detail: entry.detail },
      };
    });
  }

  /**
   * Sets fields that are not the state (messageTs, nextStep, outcomes) with the same compare-and-set; `known` and
   * `vmFacts` as for {@link transition}.
   */
  async update(
    id: string,
    patch: Partial<CloudRequest>,
    known?: CloudRequest,
    vmFacts?: VmFactsWrite,
  ): Promise<CloudRequest | undefined> {
    const result = await this.casLoop(
      id,
      (current) => ({ next: { ...current, ...stripProtected(patch) } }),
      known,
      vmFacts,
    );
    return result.ok ? result.request : undefined;
  }

  /** The channel's most recent requests, newest first. */
  async listByChannel(channel: string, limit = 15): Promise<CloudRequest[]> {
    if (limit <= 0) return [];
    return this.getMany(await this.redis.zrevrange(this.keys.channel(channel), 0, limit - 1));
  }

  /** `person`'s own most recent requests, newest first. */
  async listRequestedBy(person: string, limit = 10): Promise<CloudRequest[]> {
    if (limit <= 0) return [];
    return this.getMany(await this.redis.zrevrange(this.keys.requestedBy(person), 0, limit - 1));
  }

  /**
   * Requests not yet final that name `person` as requester or approver, oldest first, at most `limit`, and how many
   * there are. Reads only that person's index; ids whose request is gone or final leave it on the way.
   */
  async listInvolving(person: string, limit = 2000): Promise<{ requests: CloudRequest[]; total: number }> {
    const key = this.keys.involving(person);
    const [ids, total] = await Promise.all([this.redis.zrange(key, 0, limit - 1), this.redis.zcard(key)]);
    const requests = await this.getMany(ids);
    const live = new Set(requests.filter((r) => !FINAL_STATES.includes(r.state)).map((r) => r.id));
    const stale = ids.filter((id) => !live.has(id));
    if (stale.length > 0) await this.redis.zrem(key, ...stale);
    return { requests: requests.filter((r) => live.has(r.id)), total: total - stale.length };
  }

  /** The requests with these ids that exist, in the order given. */
  private async getMany(ids: string[]): Promise<CloudRequest[]> {
    if (ids.length === 0) return [];
    const values = await this.redis.mget(ids.map((id) => this.keys.request(id)));
    return values.filter((v): v is string => v !== null).map((v) => JSON.parse(v) as CloudRequest);
  }

  /** Requests whose lease is open, the earliest end first (at most `limit`), optionally of one channel. */
  async openLeases(channel?: string, limit = 200): Promise<CloudRequest[]> {
    const ids = await this.redis.zrange(this.keys.leases, 0, limit - 1);
    if (ids.length === 0) return [];
    const values = await this.redis.mget(ids.map((id) => this.keys.request(id)));
    return values
      .filter((v): v is string => v !== null)
      .map((v) => JSON.parse(v) as CloudRequest)
      .filter((r) => r.leaseOpen && (channel === undefined || r.channel === channel));
  }

  /**
   * Ids of requests that have been approved or queued since before `enteredBefore`, oldest first: each should
   * have an execute job by then. The sweeper re-enqueues those that lost theirs.
   */
  async awaitingRun(enteredBefore: Date, limit = 100, offset = 0): Promise<string[]> {
    return this.redis.zrangebyscore(
      this.keys.awaitingRun,
      '-inf',
      enteredBefore.getTime(),
      'LIMIT',
      offset,
      limit,
    );
  }

  /**
   * Removes up to `limit` requests whose retention (`retention_days` after they ended, never while a lease is open)
   * has passed, then their audit entries: the stream is trimmed to what the oldest request still stored and the
   * retention window need, and older entries of requests no longer stored are deleted one by one (an old open lease
   * keeps the trim back, not the entries of requests that ended after it). Reads only the retention index and the
   * audit entries older than the window, never all requests. With the audit export on, nothing it has not shipped is
   * removed; `onUnshipped` hears how many such entries past the window were kept (or, with the export off but its
   * group left behind, removed). Returns how many requests were removed.
   */
  async removeExpired(limit = 500, onUnshipped?: (note: UnshippedAudit) => void): Promise<number> {
    const cutoff = this.now().getTime() - this.retentionMs;
    const ids = await this.redis.zrangebyscore(this.keys.retention, '-inf', cutoff, 'LIMIT', 0, limit);
    const results = await Promise.all(
      ids.map((id) =>
        REMOVE_EXPIRED.run(
          this.redis,
          [this.keys.request(id), this.keys.retention, this.keys.created, this.keys.awaitingRun],
          [id, cutoff, this.channelPrefix, this.requestedByPrefix, this.involvingPrefix],
        ),
      ),
    );
    const removed = results.reduce<number>((sum, result) => sum + Number(result), 0);
    const [, oldest] = await this.redis.zrange(this.keys.created, 0, 0, 'WITHSCORES');
    let keepFrom = `${Math.min(cutoff, oldest === undefined ? Infinity : Number(oldest))}-0`;
    let orphansBefore = `${cutoff}-0`;
    const unshipped = await oldestUnshipped(this.redis, this.keys.audit, this.exportsAudit);
    if (this.exportsAudit && unshipped !== undefined && compareStreamIds(unshipped, orphansBefore) < 0) {
      const pastWindow = await countAudit(this.redis, this.keys.audit, unshipped, `(${orphansBefore}`);
      if (compareStreamIds(unshipped, keepFrom) < 0) keepFrom = unshipped;
      orphansBefore = unshipped;
      if (pastWindow > 0) onUnshipped?.({ kept: pastWindow });
    }
    const trimmedUnshipped =
      !this.exportsAudit && unshipped !== undefined && compareStreamIds(unshipped, keepFrom) < 0
        ? await countAudit(this.redis, this.keys.audit, unshipped, `(${keepFrom}`)
        : 0;
    await this.redis.xtrim(this.keys.audit, 'MINID', keepFrom);
    let deletedUnshipped = 0;
    if (compareStreamIds(keepFrom, orphansBefore) < 0) {
      const deleted = await this.deleteOrphanedAudit(orphansBefore);
      if (!this.exportsAudit && unshipped !== undefined)
        deletedUnshipped = deleted.filter((id) => compareStreamIds(id, unshipped) >= 0).length;
    }
    if (trimmedUnshipped + deletedUnshipped > 0)
      onUnshipped?.({ dropped: trimmedUnshipped + deletedUnshipped });
    return removed;
  }

  /**
   * Deletes the audit entries written before `before` (a stream id, excluded) whose request is no longer stored, and
   * returns their ids. What is left before the cutoff after a sweep is only the history of requests still kept (open
   * leases, recently ended), so each sweep reads little more than that.
   */
  private async deleteOrphanedAudit(before: string): Promise<string[]> {
    const deleted: string[] = [];
    let from = '-';
    for (;;) {
      const rows = await this.redis.xrange(this.keys.audit, from, `(${before}`, 'COUNT', AUDIT_SWEEP_PAGE);
      if (rows.length === 0) return deleted;
      const owners = rows.map(([, fields]) => fields[fields.indexOf('requestId') + 1] ?? '');
      const unique = [...new Set(owners)];
      const stored = await Promise.all(unique.map((id) => this.redis.exists(this.keys.request(id))));
      const gone = new Set(unique.filter((_, i) => stored[i] === 0));
      const orphaned = rows.filter((_, i) => gone.has(owners[i] ?? '')).map(([id]) => id);
      if (orphaned.length > 0) await this.redis.xdel(this.keys.audit, ...orphaned);
      deleted.push(...orphaned);
      if (rows.length < AUDIT_SWEEP_PAGE) return deleted;
      from = `(${rows[rows.length - 1]![0]}`;
    }
  }

  /**
   * Decides `change` on the current request and writes it if nobody wrote in between, else decides again on what
   * they wrote (the script answers a conflict with it). With `known` (the caller's copy, read or written moments ago)
   * the first round trip is the compare-and-set itself; a copy that is behind costs one more round. A change that does
   * not apply is only ever concluded on what the store holds: on the caller's copy it reads the request first.
   */
  private async casLoop(
    id: string,
    change: (current: CloudRequest) =>
      | {
          next: CloudRequest;
          audit?: AuditWrite;
          /** A second entry, right after the first (an approval that also queues). */
          alsoAudit?: AuditWrite;
        }
      | undefined,
    known?: CloudRequest,
    vmFacts?: VmFactsWrite,
  ): Promise<TransitionResult> {
    let fromStore = known?.id !== id;
    let json = fromStore ? await this.redis.get(this.keys.request(id)) : JSON.stringify(known);
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      if (json === null) return { ok: false, reason: 'not_found' };
      const current = fromStore ? (JSON.parse(json) as CloudRequest) : (known as CloudRequest);
      const planned = change(current);
      if (!planned && !fromStore) {
        json = await this.redis.get(this.keys.request(id));
        fromStore = true;
        continue;
      }
      if (!planned) return { ok: false, reason: 'wrong_state', request: current };
      const at = this.now();
      const next: CloudRequest = {
        ...planned.next,
        version: current.version + 1,
        revision: revisionOf(current) + (revised(current, planned.next) ? 1 : 0),
        updatedAt: at.toISOString(),
      };
      const reply = (await CAS.run(
        this.redis,
        [
          this.keys.request(id),
          this.keys.audit,
          this.keys.awaitingRun,
          this.keys.retention,
          this.keys.leases,
          ...(vmFacts ? [vmFacts.key] : []),
          ...peopleOf(next, current).map(this.keys.involving),
        ],
        [
          createHash('sha1').update(json).digest('hex'),
          JSON.stringify(next),
          at.getTime(),
          id,
          planned.audit?.state ?? '',
          planned.audit?.actor ?? '',
          next.updatedAt,
          planned.audit?.detail ?? '',
          FINAL_STATES.includes(next.state) && !next.leaseOpen ? at.getTime() : '',
          FINAL_STATES.includes(next.state) ? '1' : '',
          next.state !== current.state ? next.state : '',
          leaseIndex(current, next),
          vmFacts ? '1' : '',
          planned.alsoAudit?.state ?? '',
          planned.alsoAudit?.actor ?? '',
          planned.alsoAudit?.detail ?? '',
          ...(vmFacts?.args ?? []),
        ],
      )) as [string, string?];
      if (reply[0] === 'ok') return { ok: true, request: next };
      if (reply[0] === 'not_found') return { ok: false, reason: 'not_found' };
      // Someone else wrote first (or the caller's copy was behind): decide again on what the store holds.
      json = reply[1] ?? null;
      fromStore = true;
    }
    throw new Error(`request ${id}: too many concurrent writes`);
  }
}

/** "verified: passkey, credential AbC…" / "verified: SSO, subject 00u1…": the audit's words for a verification. */
export function verifiedDetail(verified: VerifiedBy): string {
  return verified.method === 'sso'
    ? `verified: SSO, subject ${verified.subject}`
    : `verified: passkey, credential ${verified.subject}`;
}

/**
 * Whether a write changes what a verification link was issued for: the state, what the request would do, or the
 * verification it asks for (a re-planned approval).
 */
function revised(current: CloudRequest, next: CloudRequest): boolean {
  return (
    next.state !== current.state ||
    JSON.stringify(next.params) !== JSON.stringify(current.params) ||
    JSON.stringify(next.verify) !== JSON.stringify(current.verify)
  );
}

/** The open-lease index's move for a write: the lease's end while open, 'closed' when it just closed. */
function leaseIndex(current: CloudRequest, next: CloudRequest): string {
  if (next.leaseOpen && next.lease) return String(new Date(next.lease.endsAt).getTime());
  return current.leaseOpen ? 'closed' : '';
}

/**
 * Everyone a request names as requester, approver or escalation target (current and earlier versions), once each.
 * Those escalated to are indexed from the start, so an escalation needs no index write of its own; until it
 * happens the approval policy keeps the request off their App Home.
 */
function peopleOf(...versions: Pick<CloudRequest, 'requester' | 'approvers' | 'escalateTo'>[]): string[] {
  return [...new Set(versions.flatMap((r) => [r.requester, ...r.approvers, ...(r.escalateTo ?? [])]))];
}

function stripProtected(patch: Partial<CloudRequest> | undefined): Partial<CloudRequest> {
  if (!patch) return {};
  const copy: Partial<CloudRequest> = { ...patch };
  for (const key of PROTECTED) delete copy[key];
  return copy;
}
