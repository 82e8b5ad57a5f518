import type { Cluster, Redis } from 'ioredis';
import {
  AuditAppender,
  AuditChainBusyError,
  type AuditContext,
  chainBackoff,
  MAX_CHAIN_ROUNDS,
  NO_AUDIT_CONTEXT,
  type Reservation,
} from '../audit/append.ts';
import { requestEntry } from '../audit/entry.ts';
import {
  ALLOWED_TRANSITIONS,
  type Approval,
  type AuditNote,
  type CloudRequest,
  FINAL_STATES,
  type NewRequest,
  type RequestState,
  revisionOf,
} from '../model/types.ts';
import type { VerifiedBy } from '../model/verification.ts';
import type { VmFactsWrite } from '../vm-facts.ts';
import { freshRequest, inStorageOrder, revised, stripProtected, verifiedDetail } from './changes.ts';
import { type RequestKeys, requestKeys } from './keys.ts';
import {
  DAY_MS,
  DEFAULT_AUDIT_RETENTION_DAYS,
  DEFAULT_RETENTION_DAYS,
  type RetentionScope,
  removeExpired,
  type UnshippedAudit,
} from './retention.ts';
import { CAS, CREATE } from './scripts.ts';
import { IllegalTransitionError, type TransitionInput, type TransitionResult } from './transitions.ts';
import { casArgs, createArgs } from './writes.ts';

/** Compare-and-set rounds before giving up: only reached under pathological contention. */
const MAX_CAS_ROUNDS = 50;

/** One audit entry a write records. */
export interface AuditWrite {
  state: RequestState | AuditNote;
  actor: string;
  detail?: string;
}

/**
 * Requests in Redis: one JSON value per request, an index per channel, and every state change in the audit
 * stream. Every write is a compare-and-set on the stored value (its `version` moves with each), so concurrent clicks
 * and replays change a request once.
 */
export class RequestStore {
  private readonly keys: RequestKeys;
  private readonly now: () => Date;
  private readonly retention: RetentionScope;
  private readonly audit: AuditContext;
  /** Chains this store's entries; it keeps the head as last seen, so a write chains after it and learns a newer one. */
  private readonly chain: AuditAppender;

  constructor(
    private readonly redis: Redis | Cluster,
    options: {
      prefix: string;
      now?: () => Date;
      retentionDays?: number;
      /** `audit_retention_days`, read at each sweep (default 400). */
      auditRetentionDays?: number | (() => number);
      /** The audit export is on (AUDIT_WEBHOOK_URL): retention keeps every audit entry it has not shipped. */
      exportsAudit?: boolean;
      /** Seals the audit entries and names the policy version in them. */
      audit?: AuditContext;
    },
  ) {
    this.keys = requestKeys(options.prefix);
    this.audit = options.audit ?? NO_AUDIT_CONTEXT;
    this.now = options.now ?? (() => new Date());
    this.chain = new AuditAppender(redis, options.prefix, this.audit, this.now);
    this.retention = {
      redis,
      keys: this.keys,
      now: this.now,
      retentionMs: (options.retentionDays ?? DEFAULT_RETENTION_DAYS) * DAY_MS,
      exportsAudit: options.exportsAudit ?? false,
      auditRetentionMs: () => {
        const days = options.auditRetentionDays;
        return (typeof days === 'function' ? days() : (days ?? DEFAULT_AUDIT_RETENTION_DAYS)) * DAY_MS;
      },
      sealer: this.audit.sealer,
    };
  }

  /** Stores a new request with a fresh id; audits 'created' (with `createdDetail`, e.g. the rule applied) and its initial state. */
  async create(input: NewRequest, actor: string, createdDetail?: string): Promise<CloudRequest> {
    const at = this.now();
    let request = freshRequest(input, at);
    for (let round = 0; round < MAX_CHAIN_ROUNDS; round++) {
      const version = this.audit.policyVersion();
      const reservation = await this.chain.reserve([
        requestEntry(request, { act: 'created', actor, details: createdDetail }, request.createdAt, version),
        requestEntry(request, { act: request.state, actor }, request.createdAt, version),
      ]);
      const created = await CREATE.run(this.redis, ...createArgs(this.keys, request, at, reservation)).catch(
        (error: unknown) => {
          this.chain.settle(reservation, { written: false });
          throw error;
        },
      );
      if (created === 1) return request;
      if (Array.isArray(created)) {
        this.chain.settle(reservation, { written: false, head: String(created[1] ?? '') });
        await chainBackoff(round);
        continue;
      }
      this.chain.settle(reservation, { written: false });
      // A collision of two random ids is astronomically rare; draw again rather than overwrite.
      request = freshRequest(input, at);
    }
    throw new AuditChainBusyError('the audit chain kept moving: too many concurrent writes');
  }

  /**
   * Records `act` on `request` in the audit chain without writing the request: for a move another script made (the
   * worker's lock script moves a plain run to sending in the same round trip as the lock, and records it here when
   * it could not chain the entry itself, see {@link reserveEntry}).
   */
  async record(request: CloudRequest, act: AuditWrite): Promise<void> {
    await this.chain.append([this.entryOf(request, act)]);
  }

  /**
   * Chains the entry of `act` on `request` for a lifecycle script that writes the move and its entry itself (the run's
   * start, lifecycle/run-start.ts): the script writes it only while the chain's head is still `prev`, and what it
   * answered is given back to {@link settleEntry}, as every writer of the chain does.
   */
  reserveEntry(request: CloudRequest, act: AuditWrite): Promise<Reservation> {
    return this.chain.reserve([this.entryOf(request, act)]);
  }

  /** What became of a {@link reserveEntry}'s entry: written, or not (`head`: the one Redis answered with). */
  settleEntry(reservation: Reservation, outcome: Parameters<AuditAppender['settle']>[1]): void {
    this.chain.settle(reservation, outcome);
  }

  private entryOf(request: CloudRequest, act: AuditWrite) {
    return requestEntry(
      request,
      { act: act.state, actor: act.actor, details: act.detail },
      request.updatedAt,
      this.audit.policyVersion(),
    );
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
    options: {
      queue?: boolean;
      verified?: VerifiedBy;
      revision?: number;
      /** Seals the approval on the request as this write finds it, so the seal is stored in the same write. */
      seal?: (current: CloudRequest, approval: Approval & { revision: number }) => string;
    } = {},
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
        const approval: Approval & { revision: number } = verified
          ? { user, at, verified, revision: revisionOf(current) }
          : { user, at, revision: revisionOf(current) };
        const seal = options.seal?.(current, approval);
        const counted = [...approvals, seal === undefined ? approval : { ...approval, seal }];
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
   * has passed, then their audit entries; `onUnshipped` hears what happened to entries the audit export has not
   * shipped. Returns how many requests were removed. How: see retention.ts.
   */
  async removeExpired(limit = 500, onUnshipped?: (note: UnshippedAudit) => void): Promise<number> {
    return removeExpired(this.retention, limit, onUnshipped);
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
    let chainRounds = 0;
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
      const next: CloudRequest = inStorageOrder({
        ...planned.next,
        version: current.version + 1,
        revision: revisionOf(current) + (revised(current, planned.next) ? 1 : 0),
        updatedAt: at.toISOString(),
      });
      const version = this.audit.policyVersion();
      const reservation = await this.chain.reserve(
        [planned.audit, planned.alsoAudit]
          .filter((write): write is AuditWrite => write !== undefined)
          .map((write) =>
            requestEntry(
              next,
              { act: write.state, actor: write.actor, details: write.detail },
              next.updatedAt,
              version,
            ),
          ),
      );
      const reply = (await CAS.run(
        this.redis,
        ...casArgs(this.keys, { json, current, next, at, reservation, vmFacts }),
      ).catch((error: unknown) => {
        this.chain.settle(reservation, { written: false });
        throw error;
      })) as [string, string?];
      if (reply[0] === 'ok') return { ok: true, request: next };
      this.chain.settle(reservation, {
        written: false,
        head: reply[0] === 'chain' ? (reply[1] ?? '') : undefined,
      });
      if (reply[0] === 'not_found') return { ok: false, reason: 'not_found' };
      // Another writer appended first: the same change, chained after what it wrote.
      // A lost race for the chain is not a conflict on the request: it has a budget of its own.
      if (reply[0] === 'chain') {
        if (++chainRounds > MAX_CHAIN_ROUNDS)
          throw new AuditChainBusyError(`request ${id}: the audit chain kept moving`);
        await chainBackoff(chainRounds);
        round--;
        continue;
      }
      // Someone else wrote first (or the caller's copy was behind): decide again on what the store holds.
      json = reply[1] ?? null;
      fromStore = true;
    }
    throw new Error(`request ${id}: too many concurrent writes`);
  }
}
