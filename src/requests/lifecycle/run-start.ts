import type { CloudRequest } from '../model/types.ts';
import { requestKeys } from '../store/keys.ts';
import { LuaScript } from '../store/lua.ts';
import { AWAITING_RUN_LUA, MOVE_STATE_LUA } from '../store/scripts.ts';
import type { RequestStore } from '../store/store.ts';
import { type RecordedVmFacts, recordedFacts, type VmFactsStore } from '../vm-facts.ts';

/**
 * The lifecycle's start of a run, written with the VM's lock the execute worker takes (jobs/vm-lock.ts): the lock is
 * the queue's, the move to sending is the lifecycle's, and they go out in one script.
 *
 * Takes the VM's lock, reads the request and the VM's facts under it and, for a plain run, also moves the request
 * from queued to sending and sets its first step's send marker: one round trip where a run took two (the lock with
 * its reads, then the move with the marker).
 *
 * A plain run: the request is queued at its first step, for the locked VM, not scheduled (`runAt`), not the return of
 * a lease (`returnOf`, which the worker checks against the lease first), holds no open lease, its first marker is not
 * set, and its stored JSON ends in the store's tail (store/scripts.ts MOVE_STATE_LUA). Anything else is only read, and
 * the worker decides in TypeScript as before. The re-check before the POST comes after, on the facts returned: a
 * refusal ends the request "not sent" from sending, as a scheduled run's refusal does.
 *
 * The audit entry of the move is chained right after, by the store ({@link RequestStore.record}): its hash needs the
 * whole entry, which the script cannot make.
 *
 * KEYS: lock, request, the VM's facts, step 0's marker, audit (unused), awaiting-run. ARGV: token, lock ttl ms, project uuid
 * (lower case), vmid, now ms, at (ISO), marker ttl s, request id. Answers {0} (lock held elsewhere), {1, json, facts}
 * (read only) or {2, moved json, facts}.
 */
const START_RUN = new LuaScript(`${AWAITING_RUN_LUA}${MOVE_STATE_LUA}
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
local moved = move_state(json, 'sending', ARGV[6])
if not moved then return {1, json, facts} end
redis.call('SET', KEYS[2], moved)
redis.call('SET', KEYS[4], ARGV[6], 'EX', ARGV[7])
index_awaiting_run(KEYS[6], 'sending', ARGV[5], ARGV[8])
return {2, moved, facts}
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
export interface RunStartParts<Held> {
  lock: ScriptLock<Held>;
  markers: { key(requestId: string, step: number): string };
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

/** Takes the VM's lock for a request's run ({@link START_RUN}); undefined when another job holds it. */
export async function lockAndStart<Held>(
  parts: RunStartParts<Held>,
  vm: { projectUuid: string; vmid: number },
  requestId: string,
  at: Date,
): Promise<RunStart<Held> | undefined> {
  const keys = requestKeys(parts.prefix);
  const taken = await parts.lock.acquireWith(
    vm.projectUuid,
    vm.vmid,
    START_RUN,
    [
      keys.request(requestId),
      parts.vmFacts.key(vm.projectUuid, vm.vmid),
      parts.markers.key(requestId, 0),
      keys.audit,
      keys.awaitingRun,
    ],
    [vm.projectUuid.toLowerCase(), vm.vmid, at.getTime(), at.toISOString(), parts.markerTtlS, requestId],
  );
  if (!taken) return undefined;
  const [answer, json, facts] = taken.reply as [number, string | null, string[]?];
  const started = Number(answer) === 2;
  if (started && typeof json === 'string')
    await parts.store.record(JSON.parse(json) as CloudRequest, {
      state: 'sending',
      actor: 'cloudops',
      detail: 'sending step 1',
    });
  return {
    lock: taken.lock,
    // Parsed from the text stored, so the next compare-and-set's SHA-1 of this copy is the stored one's.
    request: typeof json === 'string' ? (JSON.parse(json) as CloudRequest) : undefined,
    recorded: recordedFacts(pairsToRecord(facts ?? [])),
    started,
  };
}

/** A Redis hash's reply (field, value, field, value…) as a record. */
function pairsToRecord(pairs: string[]): Record<string, string> {
  const record: Record<string, string> = {};
  for (let i = 0; i + 1 < pairs.length; i += 2) record[String(pairs[i])] = String(pairs[i + 1]);
  return record;
}
