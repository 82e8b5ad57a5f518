/**
 * Where the audit export is in the audit stream: a consumer group on it (`AUDIT_EXPORT_GROUP`), whose entries are
 * acknowledged only once a batch was answered 2xx, so an entry read and not acknowledged (a failed post, a crash)
 * is read again. One process ships at a time, holding a lease key, so replicas do not send the same batch twice.
 */
import { randomUUID } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { AUDIT_EXPORT_GROUP, auditEntryOf, countAudit, exportGroupInfo } from '../requests/audit/audit.ts';
import type { AuditEntry } from '../requests/model/types.ts';
import { requestKeys } from '../requests/store/keys.ts';
import { LuaScript } from '../requests/store/lua.ts';

/** The group's one consumer: every process reads as it, so a successor finds what a crashed one left pending. */
const CONSUMER = 'shipper';

/** Takes the lease when free, extends it when this holder has it; 1 when held. */
const HOLD = new LuaScript(`
local holder = redis.call('GET', KEYS[1])
if holder == false or holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
`);

/** Lets the lease go if this holder still has it. */
const RELEASE = new LuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`);

/** A batch read from the stream: the ids to acknowledge, and the entries still there to send. */
export interface AuditBatch {
  ids: string[];
  entries: AuditEntry[];
}

type GroupReply = [string, [string, string[] | null][]][] | null;

/** The export's position in one deployment's audit stream (its REDIS_PREFIX; works under Redis Cluster's hash tag). */
export class AuditCursor {
  private readonly stream: string;
  private readonly leaseKey: string;
  private readonly holder = randomUUID();

  constructor(
    private readonly redis: Redis | Cluster,
    prefix: string,
  ) {
    this.stream = requestKeys(prefix).audit;
    this.leaseKey = `${prefix}:audit-export:lease`;
  }

  /** Creates the group at the stream's start (the history still kept is shipped too) unless it exists. */
  async ensureGroup(): Promise<void> {
    try {
      await this.redis.xgroup('CREATE', this.stream, AUDIT_EXPORT_GROUP, '0', 'MKSTREAM');
    } catch (error) {
      if (!(error instanceof Error && error.message.startsWith('BUSYGROUP'))) throw error;
    }
  }

  /** Whether this process holds the shipping lease for `ttlMs` more (taking it when free). */
  async hold(ttlMs: number): Promise<boolean> {
    return Number(await HOLD.run(this.redis, [this.leaseKey], [this.holder, ttlMs])) === 1;
  }

  /** Lets the lease go, so a restarted or other process ships at once instead of after its time-out. */
  async release(): Promise<void> {
    await RELEASE.run(this.redis, [this.leaseKey], [this.holder]);
  }

  /** Up to `count` entries: first those read before and not acknowledged, else the next new ones. */
  async take(count: number): Promise<AuditBatch> {
    const pending = await this.read(count, '0');
    return pending.ids.length > 0 ? pending : this.read(count, '>');
  }

  /** Marks `ids` shipped: the cursor moves past them. */
  async ack(ids: readonly string[]): Promise<void> {
    if (ids.length > 0) await this.redis.xack(this.stream, AUDIT_EXPORT_GROUP, ...ids);
  }

  /** How many entries are not shipped yet: read and not acknowledged, plus not read. */
  async backlog(): Promise<number> {
    const group = await exportGroupInfo(this.redis, this.stream);
    if (!group) return countAudit(this.redis, this.stream, '-', '+');
    const pending = Number(group.get('pending') ?? 0);
    const lag = group.get('lag');
    // Redis cannot always tell the lag (entries deleted after the cursor): count what follows it then.
    if (typeof lag === 'number') return pending + lag;
    return (
      pending + (await countAudit(this.redis, this.stream, `(${String(group.get('last-delivered-id'))}`, '+'))
    );
  }

  private async read(count: number, from: '0' | '>'): Promise<AuditBatch> {
    const reply = (await this.redis.xreadgroup(
      'GROUP',
      AUDIT_EXPORT_GROUP,
      CONSUMER,
      'COUNT',
      count,
      'STREAMS',
      this.stream,
      from,
    )) as GroupReply;
    const rows = reply?.[0]?.[1] ?? [];
    return {
      ids: rows.map(([id]) => id),
      // A pending entry removed from the stream meanwhile comes back without fields: acknowledged, not sent.
      entries: rows.flatMap(([id, fields]) => (fields ? [auditEntryOf(id, fields)] : [])),
    };
  }
}
