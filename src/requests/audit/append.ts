/**
 * Appending to the audit chain from outside a request's write (a policy change, an agent disabled, a passkey
 * registered or reset, a run started by the worker's lock script): the same chaining as the store's scripts, in a
 * script of its own that writes only if the chain's head is still the one chained after.
 */
import type { Cluster, Redis } from 'ioredis';
import { scrubSecrets } from '../../observability/logger.ts';
import type { AuditBody } from '../model/audit-record.ts';
import { requestKeys } from '../store/keys.ts';
import { LuaScript } from '../store/lua.ts';
import { AUDIT_APPEND_LUA } from '../store/scripts.ts';
import { type AuditSealer, chainAfter, type SealedEntry } from './chain.ts';

/** What every writer of the audit needs: the seal keys (when SEAL_KEY is set) and the policy's version now. */
export interface AuditContext {
  sealer?: AuditSealer;
  /** The version of the policy the process holds now (12 hex digits). */
  policyVersion: () => string | null;
  /**
   * Scrubs configured secrets from an entry's note before it is hashed (as the logs are scrubbed): a chained entry is
   * shipped and printed as written, since changing it later would break its hash.
   */
  scrub?: (text: string) => string;
}

/** No seal, no policy version: tests and tools that write no decisions. */
export const NO_AUDIT_CONTEXT: AuditContext = { policyVersion: () => null };

/** Rounds before giving up on a chain every other writer keeps moving: only under pathological contention. */
export const MAX_CHAIN_ROUNDS = 50;

/**
 * Waits a moment before chaining again after the head moved: a random share of a window that doubles with each
 * round (up to 64 ms). Writers that lost to each other at once would otherwise retry at once and lose again: two
 * processes each with many writes in flight kept invalidating each other's whole batch.
 */
export function chainBackoff(round: number): Promise<void> {
  const windowMs = Math.min(64, 2 ** Math.min(round, 6));
  return new Promise((resolve) => setTimeout(resolve, Math.random() * windowMs));
}

/** The chain kept moving under a writer for {@link MAX_CHAIN_ROUNDS} rounds. */
export class AuditChainBusyError extends Error {
  override readonly name = 'AuditChainBusyError';
  readonly code = 'AUDIT_CHAIN_BUSY';
}

/** The key names of the chain beside the stream. */
export function chainKeys(prefix: string) {
  const keys = requestKeys(prefix);
  return {
    stream: keys.audit,
    head: keys.auditHead,
    anchor: keys.auditAnchor,
    /** The policy version the deployment's last `policy_changed` entry moved to: each change is written once. */
    policyVersion: `${prefix}:policy-version`,
  };
}

/** The script's arguments for each sealed entry: canonical JSON, hash, seal. */
export function entryArgs(entries: SealedEntry[]): string[] {
  return entries.flatMap((entry) => [entry.json, entry.hash, entry.seal]);
}

/**
 * KEYS: audit stream, chain head, and optionally a key whose value the append sets (a once-only entry: written only
 * while the key holds another value). ARGV: now ms, the head chained after, the once-only value ('' for none), then
 * each entry's JSON, hash and seal. Answers {'ok'}, {'chain', head} (the head moved: nothing written) or {'dup'}
 * (the key already holds the value: nothing written).
 */
const APPEND = new LuaScript(`${AUDIT_APPEND_LUA}
local head = chain_head(KEYS[2])
if head ~= ARGV[2] then return {'chain', head} end
if KEYS[3] then
  if redis.call('GET', KEYS[3]) == ARGV[3] then return {'dup'} end
  redis.call('SET', KEYS[3], ARGV[3])
end
for i = 4, #ARGV, 3 do audit_append(KEYS[1], KEYS[2], ARGV[1], ARGV[i], ARGV[i + 1], ARGV[i + 2]) end
return {'ok'}
`);

/** The head of one prefix's chain as this process expects it, and the count of reservations made on it. */
interface ChainState {
  head: string | undefined;
  generation: number;
  loading: Promise<string> | undefined;
}

const CHAIN_STATES = new Map<string, ChainState>();

/**
 * One expected head per prefix in a process: its writers (the web's store, the workers' store on their own
 * connection, the passkeys, the agent switches) chain after each other's entries instead of each losing the race to
 * the others' last write and chaining again (a wasted script, a hash and a seal, and a backoff on every click of a
 * ROLE=all bot). The script still checks the head: what another process wrote is learned from its answer.
 */
function chainStateOf(prefix: string): ChainState {
  let state = CHAIN_STATES.get(prefix);
  if (!state) {
    state = { head: undefined, generation: 0, loading: undefined };
    CHAIN_STATES.set(prefix, state);
  }
  return state;
}

/** Entries chained after the head this writer expected; see {@link AuditAppender.reserve}. */
export interface Reservation {
  prev: string;
  entries: SealedEntry[];
  /** The writer's count of reservations when this one was made. */
  generation: number;
}

/**
 * Chains entries onto one prefix's audit chain. A process chains its own writes one after another without waiting
 * for each to land: each reservation takes the head as this writer expects it and moves it to its own last hash at
 * once, and the writes leave on one connection in that order, which Redis keeps. A write that does not land (the
 * request changed, or another process appended first) puts the head back or learns the one Redis answered with, and
 * the writer chains again.
 */
export class AuditAppender {
  private readonly keys: ReturnType<typeof chainKeys>;
  /** What this process expects of the chain, shared by all its writers of the prefix ({@link chainStateOf}). */
  private readonly state: ChainState;

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly prefix: string,
    readonly context: AuditContext,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.keys = chainKeys(prefix);
    this.state = chainStateOf(prefix);
  }

  /** Chains `bodies` after the head as this writer expects it, and expects its own last hash from now on. */
  async reserve(bodies: Omit<AuditBody, 'prev'>[]): Promise<Reservation> {
    const state = this.state;
    if (bodies.length === 0) return { prev: '', entries: [], generation: state.generation };
    if (state.head === undefined) {
      state.loading ??= this.redis.get(this.keys.head).then(
        (head) => head ?? '',
        (error: unknown) => {
          state.loading = undefined;
          throw error;
        },
      );
      const fetched = await state.loading;
      state.loading = undefined;
      state.head ??= fetched;
    }
    const prev = state.head;
    // Credentials by their shape (tokens, a password in a URL) always; the configured secrets where they are known.
    const scrub = this.context.scrub ?? ((text: string) => scrubSecrets(text, []));
    const scrubbed = bodies.map((body) =>
      body.details === null ? body : { ...body, details: scrub(body.details) },
    );
    const entries = chainAfter(prev, scrubbed, this.context.sealer);
    if (entries.length > 0) {
      state.head = entries.at(-1)?.hash;
      state.generation++;
    }
    return { prev, entries, generation: state.generation };
  }

  /**
   * What became of a reservation's write: written, refused because the head moved (`head`: the one Redis holds), or
   * not written for another reason. Only the latest reservation corrects the expected head: later ones chained on an
   * entry that did not land fail in their turn, and the last of them corrects it.
   */
  settle(reservation: Reservation, outcome: { written: true } | { written: false; head?: string }): void {
    if (outcome.written || reservation.entries.length === 0) return;
    if (reservation.generation !== this.state.generation) return;
    this.state.head = outcome.head ?? reservation.prev;
  }

  /**
   * Appends `bodies` (each without `prev`) in order, as one write. With `once`, only while `once.key` does not hold
   * `once.value` already, and it holds it from then on: of several processes making the same change, one writes
   * (the others are answered 'dup').
   */
  async append(
    bodies: Omit<AuditBody, 'prev'>[],
    once?: { key: string; value: string },
  ): Promise<'ok' | 'dup'> {
    for (let round = 0; round < MAX_CHAIN_ROUNDS; round++) {
      const reservation = await this.reserve(bodies);
      const reply = (await APPEND.run(
        this.redis,
        [this.keys.stream, this.keys.head, ...(once ? [once.key] : [])],
        [this.now().getTime(), reservation.prev, once?.value ?? '', ...entryArgs(reservation.entries)],
      ).catch((error: unknown) => {
        this.settle(reservation, { written: false });
        throw error;
      })) as [string, string?];
      if (reply[0] === 'ok') return 'ok';
      if (reply[0] === 'chain') {
        this.settle(reservation, { written: false, head: reply[1] ?? '' });
        await chainBackoff(round);
        continue;
      }
      this.settle(reservation, { written: false });
      return 'dup';
    }
    throw new AuditChainBusyError(`the audit chain of ${this.prefix} kept moving`);
  }

  /** The policy's version now, as entries record it. */
  policyVersion(): string | null {
    return this.context.policyVersion();
  }
}
