import type { Cluster, Redis } from 'ioredis';
import { rankReferenceCosts } from '../rules/cost.ts';
import type { PriceLike, ReferenceVm } from '../rules/types.ts';
import { type DigestSnapshot, KNOWN_PRICE_FIELDS } from './price-fields.ts';

/** A channel's chart shows its last this many digests. */
export const CHANNEL_POINTS = 12;
/** A cluster's chart shows its last this many known cost changes. */
export const CLUSTER_POINTS = 24;

/** One point of a chart: when, which reference VM, and each cluster's monthly cost then. */
export interface HistoryPoint {
  /** ISO 8601. */
  at: string;
  /** The reference VM the costs are for ({@link referenceKey}): points of another one are not comparable. */
  ref: string;
  /** Cluster name → monthly cost, two decimals; clusters with a missing price are left out. */
  costs: Record<string, string>;
}

/** The reference VM as a short stable key, e.g. `2c-4g-50d-regular-ip`. */
export function referenceKey(reference: ReferenceVm): string {
  return `${reference.cores}c-${reference.ram_gb}g-${reference.os_disk_gb}d-${reference.cpu_class}${reference.public_ip ? '-ip' : ''}`;
}

/** Each cluster's reference VM cost a month at `at`, as a chart point (clusters lacking a price are left out). */
export function historyPoint(
  clusters: readonly { name: string; prices: PriceLike }[],
  reference: ReferenceVm,
  at: Date,
): HistoryPoint {
  const costs: Record<string, string> = {};
  for (const { item, cost } of rankReferenceCosts(clusters, reference)) {
    if (cost.missing.length === 0) costs[item.name] = cost.monthly.toFixed(2);
  }
  return { at: at.toISOString(), ref: referenceKey(reference), costs };
}

/** The chart point of a digest's snapshot (its prices kept by their wire names). */
export function pointOfSnapshot(snapshot: DigestSnapshot, reference: ReferenceVm): HistoryPoint {
  const clusters = snapshot.clusters.map((c) => {
    const prices: PriceLike = {};
    for (const field of KNOWN_PRICE_FIELDS) {
      const value = c.prices[field.key];
      if (value !== undefined && field.prop in PRICE_LIKE_PROPS)
        prices[field.prop as keyof PriceLike] = value;
    }
    return { name: c.name, prices };
  });
  return historyPoint(clusters, reference, new Date(snapshot.at));
}

/** The prices the cost rules read. */
const PRICE_LIKE_PROPS: Record<keyof PriceLike, true> = {
  vcoreRegular: true,
  vcoreLight: true,
  ram: true,
  storageFast: true,
  publicIp: true,
  privateNetworkTag: true,
};

/**
 * For each cluster (ARGV[4..]: field, then its `ref|cost|`), appends `ref|cost|at` to the cluster's lines unless
 * it equals the last one kept (several channels' digests see the same price), keeping the last ARGV[2] lines. One
 * key and one call for all clusters of a digest.
 */
const RECORD_CHANGES = `
local keep = tonumber(ARGV[2])
for i = 4, #ARGV, 2 do
  local field, entry = ARGV[i], ARGV[i + 1]
  local value = redis.call('hget', KEYS[1], field)
  local last = value and string.match(value, '([^\\n]*)$')
  if not (last and string.sub(last, 1, #entry) == entry) then
    local lines = {}
    if value then
      for line in string.gmatch(value, '[^\\n]+') do lines[#lines + 1] = line end
    end
    lines[#lines + 1] = entry .. ARGV[1]
    while #lines > keep do table.remove(lines, 1) end
    redis.call('hset', KEYS[1], field, table.concat(lines, '\\n'))
  end
end
redis.call('expire', KEYS[1], ARGV[3])
return 0`;

/**
 * The price history the charts draw, bounded and expiring: per channel its last {@link CHANNEL_POINTS} digests
 * (`<prefix>:digest:history:<channel>`, a list of JSON points), per cluster its last {@link CLUSTER_POINTS} cost
 * changes (one hash `<prefix>:prices:history`, a field per cluster of `ref|cost|at` lines: one key, so one call
 * records a digest's clusters). Both expire `keepDays` after their last write, like requests after
 * `retention_days`: a channel that unsubscribed leaves nothing.
 */
export class PriceHistory {
  constructor(
    private readonly redis: Redis | Cluster,
    private readonly prefix: string,
    private readonly keepDays: number,
  ) {}

  channelKey(channel: string): string {
    return `${this.prefix}:digest:history:${channel}`;
  }

  /** The hash of every cluster's cost changes, a field per cluster. */
  clustersKey(): string {
    return `${this.prefix}:prices:history`;
  }

  private get ttlSeconds(): number {
    return Math.round(this.keepDays * 86_400);
  }

  /** Records a channel's digest, and each cluster's cost where it changed. */
  async recordDigest(channel: string, point: HistoryPoint): Promise<void> {
    const key = this.channelKey(channel);
    // A retried digest job records its point once.
    const last = await this.redis.lindex(key, -1);
    if (last?.includes(`"at":"${point.at}"`)) return;
    await this.redis
      .multi()
      .rpush(key, JSON.stringify(point))
      .ltrim(key, -CHANNEL_POINTS, -1)
      .expire(key, this.ttlSeconds)
      .exec();
    await this.recordClusters(point);
  }

  /** Records each cluster's cost of `point` where it differs from the last one known. */
  async recordClusters(point: HistoryPoint): Promise<void> {
    const clusters = Object.entries(point.costs);
    if (clusters.length === 0) return;
    await this.redis.eval(
      RECORD_CHANGES,
      1,
      this.clustersKey(),
      point.at,
      String(CLUSTER_POINTS),
      String(this.ttlSeconds),
      ...clusters.flatMap(([cluster, cost]) => [cluster, `${point.ref}|${cost}|`]),
    );
  }

  /** The channel's past digests for the reference VM `ref`, oldest first. */
  async channelPoints(channel: string, ref: string): Promise<HistoryPoint[]> {
    const raw = await this.redis.lrange(this.channelKey(channel), 0, -1);
    const points: HistoryPoint[] = [];
    for (const entry of raw) {
      try {
        const point = JSON.parse(entry) as HistoryPoint;
        if (point.ref === ref && typeof point.at === 'string' && point.costs) points.push(point);
      } catch {
        // A damaged entry costs one point of one chart.
      }
    }
    return points;
  }

  /** A cluster's known cost changes for the reference VM `ref`, oldest first, as chart points. */
  async clusterPoints(cluster: string, ref: string): Promise<HistoryPoint[]> {
    const raw = (await this.redis.hget(this.clustersKey(), cluster)) ?? '';
    return raw.split('\n').flatMap((entry) => {
      const [entryRef, cost, at] = entry.split('|');
      if (entryRef !== ref || !cost || !at) return [];
      return [{ at, ref, costs: { [cluster]: cost } }];
    });
  }
}
