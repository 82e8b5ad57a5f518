import { hash } from 'node:crypto';
import type { Reservation } from '../audit/append.ts';
import { type CloudRequest, revisionOf } from '../model/types.ts';
import { requestKeys } from '../store/keys.ts';
import { LuaScript } from '../store/lua.ts';
import { AUDIT_APPEND_LUA, AWAITING_RUN_LUA, MOVE_STATE_LUA } from '../store/scripts.ts';
import type { RequestStore } from '../store/store.ts';
import { type RecordedVmFacts, recordedFacts, type VmFactsStore } from '../vm-facts.ts';

/**
 * The lifecycle's start of a run, written with the VM's lock the execute worker takes (jobs/vm-lock.ts): the lock is
 * the queue's, the move to sending is the lifecycle's, and they go out in one script.
 *
 * Takes the VM's lock, reads the request and the VM's facts under it and, for a plain run, also moves the request
 * from queued to sending, sets its first step's send marker and appends the move's audit entry: one round trip where
 * a run took three (the lock with its reads, the move with the marker, the entry).
 *
 * A plain run: the request is queued at its first step, for the locked VM, not scheduled (`runAt`), not the return of
 * a lease (`returnOf`, which the worker checks against the lease first), holds no open lease, its first marker is not
 * set, and its stored JSON ends in the store's tail (store/scripts.ts MOVE_STATE_LUA). Anything else is only read, and
 * the worker decides in TypeScript as before. The re-check before the POST comes after, on the facts returned: a
 * refusal ends the request "not sent" from sending, as a scheduled run's refusal does.
 *
 * The entry's hash needs the whole entry, which the script cannot make; so the run predicts the move from the request
 * as the write that queued it stored it (the execute job carries that copy, {@link predictStart}) and chains the entry
 * before the script leaves. The script writes the predicted request and its entry only when the stored text is that
 * copy byte for byte (its SHA-1) and the chain's head is still the one chained after. Otherwise (a job without the
 * copy, a request written since, another process's entry first) it moves the request by itself as before, and the
 * entry is chained right after by the store ({@link RequestStore.record}).
 *
 * KEYS: lock, request, the VM's facts, step 0's marker, audit, awaiting-run, the chain's head. ARGV: token, lock ttl
 * ms, project uuid (lower case), vmid, now ms, at (ISO), marker ttl s, request id, then the prediction or '' each:
 * SHA-1 of the copy, the moved request's JSON, the head chained after, the entry's canonical JSON, hash and seal.
 * Answers {0} (lock held elsewhere), {1, json, facts} (read only), {2, moved json, facts, head} (moved; its entry not
 * written, `head` the chain's when that was why) or {3, false, facts} (moved as predicted, with its entry).
 */
const START_RUN = new LuaScript(`${AUDIT_APPEND_LUA}${AWAITING_RUN_LUA}${MOVE_STATE_LUA}
if not redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then return {0} end
local json = redis.call('GET', KEYS[2])
local facts = redis.call('HGETALL', KEYS[3])
if not json then return {1, false, facts} end
local request = cjson.decode(json)
local function absent(value) return value == nil or value == cjson.null end
local params = type(request.params) == 'table' and request.params or {}
local plain = request.state == 'queued' and request.nextStep == 0 and absent(request.runAt)
  and absent(params.returnOf) and request.leaseOpen ~= true
  and type(request.projectUuid) == 'string' and string.lower(request.projectUuid) == ARGV[3]
  and tonumber(request.vmid) == tonumber(ARGV[4]) and redis.call('EXISTS', KEYS[4]) == 0
if not plain then return {1, json, facts} end
local head = ''
if ARGV[9] ~= '' and redis.sha1hex(json) == ARGV[9] then
  head = chain_head(KEYS[7])
  if head == ARGV[11] then
    redis.call('SET', KEYS[2], ARGV[10])
    redis.call('SET', KEYS[4], ARGV[6], 'EX', ARGV[7])
    index_awaiting_run(KEYS[6], 'sending', ARGV[5], ARGV[8])
    audit_append(KEYS[5], KEYS[7], ARGV[5], ARGV[12], ARGV[13], ARGV[14])
    return {3, false, facts}
  end
end
local moved = move_state(json, 'sending', ARGV[6])
if not moved then return {1, json, facts} end
redis.call('SET', KEYS[2], moved)
redis.call('SET', KEYS[4], ARGV[6], 'EX', ARGV[7])
index_awaiting_run(KEYS[6], 'sending', ARGV[5], ARGV[8])
return {2, moved, facts, head}
`);

/** The VM's lock as the run's start uses it: taken by running a script with the lock's own keys first. */
export interface ScriptLock<Held> {
  acquireWith(
    projectUuid: string,
    vmid: number,
    script: LuaScript,
    keys: string[],
    args: (string | number)[],
  ): Promise<{ lock: Held; reply: unknown[] } | undefined>;
}

/** What the run's start needs of the worker: its lock, where its send markers live, and the VM facts' keys. */
export interface RunStartParts<Held extends { release(): Promise<void> }> {
  lock: ScriptLock<Held>;
  markers: {
    key(requestId: string, step: number): string;
    clear(requestId: string, step: number): Promise<void>;
  };
  /** How long a send marker lives (jobs/send-markers.ts). */
  markerTtlS: number;
  vmFacts: VmFactsStore;
  prefix: string;
  /** Chains the move's audit entry right after the script ({@link RequestStore.record}). */
  store: RequestStore;
}

/** What the lock's script found, and whether it started the run. */
export interface RunStart<Held> {
  lock: Held;
  /** The request under the lock (moved to sending when `started`), undefined when there is none. */
  request: CloudRequest | undefined;
  /** What the bot recorded for the locked VM, read with the lock: it changes only under the lock. */
  recorded: RecordedVmFacts | undefined;
  /** The script moved the request to sending and set step 0's marker. */
  started: boolean;
}

/** The move to sending a run's start predicts, and its entry chained (see {@link START_RUN}). */
interface Prediction {
  /** SHA-1 of the copy the move was predicted from. */
  sha: string;
  /** The moved request's JSON, and the request it parses to (its entry's). */
  moved: string;
  request: CloudRequest;
  reservation: Reservation;
}

/** The entry of a plain run's move to sending. */
const SENDING = { state: 'sending', actor: 'cloudops', detail: 'sending step 1' } as const;

/**
 * Takes the VM's lock for a request's run ({@link START_RUN}); undefined when another job holds it. `copy`: the
 * request as the write that queued it stored it (the execute job's), from which the move is predicted.
 */
export async function lockAndStart<Held extends { release(): Promise<void> }>(
  parts: RunStartParts<Held>,
  vm: { projectUuid: string; vmid: number },
  requestId: string,
  at: Date,
  copy?: CloudRequest,
): Promise<RunStart<Held> | undefined> {
  const keys = requestKeys(parts.prefix);
  const predicted = await predictStart(parts.store, copy, requestId, vm, at);
  const [entry] = predicted?.reservation.entries ?? [];
  let taken: { lock: Held; reply: unknown[] } | undefined;
  try {
    taken = await parts.lock.acquireWith(
      vm.projectUuid,
      vm.vmid,
      START_RUN,
      [
        keys.request(requestId),
        parts.vmFacts.key(vm.projectUuid, vm.vmid),
        parts.markers.key(requestId, 0),
        keys.audit,
        keys.awaitingRun,
        keys.auditHead,
      ],
      [
        vm.projectUuid.toLowerCase(),
        vm.vmid,
        at.getTime(),
        at.toISOString(),
        parts.markerTtlS,
        requestId,
        predicted?.sha ?? '',
        predicted?.moved ?? '',
        predicted?.reservation.prev ?? '',
        entry?.json ?? '',
        entry?.hash ?? '',
        entry?.seal ?? '',
      ],
    );
  } catch (error) {
    if (predicted) parts.store.settleEntry(predicted.reservation, { written: false });
    throw error;
  }
  const answer = Number(taken?.reply[0] ?? 0);
  if (predicted && answer !== 3) {
    const head = answer === 2 ? String(taken?.reply[3] ?? '') : '';
    parts.store.settleEntry(predicted.reservation, head ? { written: false, head } : { written: false });
  }
  if (!taken) return undefined;
  const { lock } = taken;
  const [, json, facts] = taken.reply as [number, string | null, string[]?];
  try {
    // Parsed from the text stored, so the next compare-and-set's SHA-1 of this copy is the stored one's.
    const request =
      answer === 3
        ? predicted?.request
        : typeof json === 'string'
          ? (JSON.parse(json) as CloudRequest)
          : undefined;
    if (answer === 2 && request) await parts.store.record(request, SENDING);
    return {
      lock,
      request,
      recorded: recordedFacts(pairsToRecord(facts ?? [])),
      started: answer === 2 || answer === 3,
    };
  } catch (error) {
    // The caller never gets the lock (its renewal would hold the VM for the life of the process): nothing was sent,
    // so the first step's marker the script set goes, and the retry starts the same step.
    if (answer === 2 || answer === 3) await parts.markers.clear(requestId, 0).catch(() => undefined);
    await lock.release().catch(() => undefined);
    throw error;
  }
}

/**
 * The move to sending the lock's script would make of `copy` (as store/scripts.ts MOVE_STATE_LUA makes it), with its
 * audit entry chained: undefined when there is no copy, or it is no plain run's start.
 */
async function predictStart(
  store: RequestStore,
  copy: CloudRequest | undefined,
  requestId: string,
  vm: { projectUuid: string; vmid: number },
  at: Date,
): Promise<Prediction | undefined> {
  if (
    copy?.id !== requestId ||
    copy.state !== 'queued' ||
    copy.nextStep !== 0 ||
    copy.runAt != null ||
    (copy.params.kind === 'resize' && copy.params.returnOf != null) ||
    copy.leaseOpen === true ||
    copy.projectUuid.toLowerCase() !== vm.projectUuid.toLowerCase() ||
    copy.vmid !== vm.vmid
  )
    return undefined;
  const move = predictMove(copy, at);
  if (move === undefined) return undefined;
  const reservation = await store.reserveEntry(move.request, SENDING);
  return { sha: hash('sha1', move.stored, 'hex'), moved: move.moved, request: move.request, reservation };
}

/**
 * The text the request's copy is stored as, the text {@link moveState} makes of it, and the request that text parses
 * to, built without parsing it: the tail's four fields keep their places in a spread, so it stringifies to `moved`
 * byte for byte (the next compare-and-set hashes it). Undefined where the text has no tail.
 */
export function predictMove(
  copy: CloudRequest,
  at: Date,
): { stored: string; moved: string; request: CloudRequest } | undefined {
  const stored = JSON.stringify(copy);
  const updatedAt = at.toISOString();
  const moved = moveState(stored, 'sending', updatedAt);
  if (moved === undefined) return undefined;
  const request: CloudRequest = {
    ...copy,
    state: 'sending',
    version: copy.version + 1,
    revision: revisionOf(copy) + 1,
    updatedAt,
  };
  return { stored, moved, request };
}

/** The stored JSON's tail as {@link MOVE_STATE_LUA} matches it. */
const TAIL = /^(.*),"state":"[A-Za-z0-9_]+","version":(\d+),"revision":(\d+),"updatedAt":"[^"]*"}$/s;

/** {@link MOVE_STATE_LUA} in TypeScript: the same text for the same JSON, or undefined where it finds no tail. */
export function moveState(json: string, to: string, at: string): string | undefined {
  const match = TAIL.exec(json);
  if (!match) return undefined;
  const [, head, version, revision] = match;
  return `${head},"state":"${to}","version":${Number(version) + 1},"revision":${Number(revision) + 1},"updatedAt":"${at}"}`;
}

/** A Redis hash's reply (field, value, field, value…) as a record. */
function pairsToRecord(pairs: string[]): Record<string, string> {
  const record: Record<string, string> = {};
  for (let i = 0; i + 1 < pairs.length; i += 2) record[String(pairs[i])] = String(pairs[i + 1]);
  return record;
}
