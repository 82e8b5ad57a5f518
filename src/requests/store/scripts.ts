import { RECORD_VM_LUA } from '../vm-facts.ts';
import { LuaScript } from './lua.ts';

// The store's Lua: each write and the records that go with it (audit entry, indexes) run as one script, so a crash
// between them cannot leave a request and its records apart.

/**
 * Appends one chained audit entry (its canonical JSON `e`, hash `h` and seal `s`, all made by the writer, see
 * requests/audit/chain.ts) whose stream id follows the application clock (ARGV nowMs) but never goes backwards, so
 * `since` filters match the entries' time even with an injected clock, and moves the chain's head to its hash.
 * `chain_head` is what a script compares the writer's `prev` with before writing anything: a writer that chained
 * onto an older head is answered with the current one and chains again (docs/operations.md#audit-chain).
 */
export const AUDIT_APPEND_LUA = `
local function chain_head(head_key)
  return redis.call('GET', head_key) or ''
end
local function audit_append(stream, head_key, now_ms, body, hash, seal)
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
  redis.call('SET', head_key, hash)
  if seal == '' then return redis.call('XADD', stream, id, 'e', body, 'h', hash) end
  return redis.call('XADD', stream, id, 'e', body, 'h', hash, 's', seal)
end
`;

/**
 * Keeps the index of requests that must have an execute job (approved or queued) in step with the state, in the
 * same script as the write, so a crash between the two cannot leave a request out of it.
 */
export const AWAITING_RUN_LUA = `
local function index_awaiting_run(key, state, now_ms, id)
  if state == 'approved' or state == 'queued' then
    redis.call('ZADD', key, now_ms, id)
  elseif state ~= '' then
    redis.call('ZREM', key, id)
  end
end
`;

/**
 * Moves a request's state by editing its stored JSON as text: the store writes the fields a state change moves last
 * ({@link inStorageOrder}), so a script rewrites that tail and nothing else. Decoding and encoding with cjson instead
 * would reorder keys, rewrite numbers and turn an empty array into an object: the stored text would no longer be the
 * one the writer's copy hashes to, and every compare-and-set after it would conflict. Returns the new JSON, or nil
 * when the stored JSON does not end in that tail (written before the order; the caller takes the path in TypeScript).
 */
export const MOVE_STATE_LUA = `
local function move_state(json, to, at)
  local head, version, revision = string.match(json,
    '^(.*),"state":"[%w_]+","version":(%d+),"revision":(%d+),"updatedAt":"[^"]*"}$')
  if not head then return nil end
  return string.format('%s,"state":"%s","version":%d,"revision":%d,"updatedAt":"%s"}',
    head, to, tonumber(version) + 1, tonumber(revision) + 1, at)
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
 * KEYS: request, channel index, audit, awaiting-run index, created index, requester's index, the audit chain's head,
 * then the live-involvement index of each person or group named (requester, approvers, those escalated to).
 * ARGV: json, nowMs, id, initial state, the chain's head the entries were chained after, unused, score, keep,
 * requester keep, then the 'created' entry and the initial state's (each: canonical JSON, hash, seal).
 * Returns 1, 0 when the id is taken, or {'chain', head} when the head moved (nothing written).
 */
export const CREATE = new LuaScript(`${AUDIT_APPEND_LUA}${AWAITING_RUN_LUA}
local head = chain_head(KEYS[7])
if head ~= ARGV[5] then return {'chain', head} end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX') then return 0 end
redis.call('ZADD', KEYS[2], ARGV[7], ARGV[3])
redis.call('ZADD', KEYS[5], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[6], ARGV[7], ARGV[3])
redis.call('ZREMRANGEBYRANK', KEYS[6], 0, -(tonumber(ARGV[9]) + 1))
for i = 8, #KEYS do redis.call('ZADD', KEYS[i], ARGV[7], ARGV[3]) end
index_awaiting_run(KEYS[4], ARGV[4], ARGV[2], ARGV[3])
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[8]) + 1))
audit_append(KEYS[3], KEYS[7], ARGV[2], ARGV[10], ARGV[11], ARGV[12])
audit_append(KEYS[3], KEYS[7], ARGV[2], ARGV[13], ARGV[14], ARGV[15])
return 1
`);

/**
 * Compare-and-set on the request's stored JSON, compared by SHA-1 (what the writer decided on, byte for byte: a
 * caller's copy that differs in any way from the stored one is a conflict); on success also appends the audit entry and updates the awaiting-run,
 * retention, open-lease and involvement indexes, in the same script so a state change and its records cannot part.
 * With a VM facts record, what the bot applied to the VM is written too.
 * KEYS: request, audit, awaiting-run, retention, open leases, the audit chain's head, the VM's facts hash when there
 * is a record, then the live-involvement index of each person named.
 * ARGV: SHA-1 of the expected current json, new json, nowMs, id, the entry's canonical JSON ('' for no entry), its
 * hash, the chain's head it was chained after, its seal, ended-at ms ('' while the request is live or holds a
 * lease), '1' when the new state is final, the new state ('' when the state does not change), the lease's end in ms
 * while it is open ('closed' when it just closed, '' otherwise), '1' when a VM facts record follows (its args from
 * ARGV[17]), then a second entry chained right after the first (JSON, hash, seal; '' for none: an approval that also
 * queues the request records both). Answers {'chain', head} when the head moved (nothing written).
 */
export const CAS = new LuaScript(`${AUDIT_APPEND_LUA}${AWAITING_RUN_LUA}${RETENTION_LUA}${RECORD_VM_LUA}
local current = redis.call('GET', KEYS[1])
if not current then return {'not_found'} end
if redis.sha1hex(current) ~= ARGV[1] then return {'conflict', current} end
if ARGV[5] ~= '' then
  local head = chain_head(KEYS[6])
  if head ~= ARGV[7] then return {'chain', head} end
end
redis.call('SET', KEYS[1], ARGV[2])
index_awaiting_run(KEYS[3], ARGV[11], ARGV[3], ARGV[4])
index_retention(KEYS[4], ARGV[9], ARGV[4])
if ARGV[12] == 'closed' then
  redis.call('ZREM', KEYS[5], ARGV[4])
elseif ARGV[12] ~= '' then
  redis.call('ZADD', KEYS[5], ARGV[12], ARGV[4])
end
local people = 7
if ARGV[13] == '1' then
  record_vm(KEYS[7], ARGV, 17)
  people = 8
end
if ARGV[10] == '1' then
  for i = people, #KEYS do redis.call('ZREM', KEYS[i], ARGV[4]) end
end
if ARGV[5] ~= '' then audit_append(KEYS[2], KEYS[6], ARGV[3], ARGV[5], ARGV[6], ARGV[8]) end
if ARGV[14] ~= '' then audit_append(KEYS[2], KEYS[6], ARGV[3], ARGV[14], ARGV[15], ARGV[16]) end
return {'ok'}
`);

/**
 * Removes one request that ended before the cutoff, unless a later write opened a lease (then it only leaves the
 * index). KEYS: request, retention, created, awaiting-run. ARGV: id, cutoff ms, channel-key prefix, requester-key
 * prefix, involvement-key prefix. Returns 1 when the request was removed.
 */
export const REMOVE_EXPIRED = new LuaScript(`
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
