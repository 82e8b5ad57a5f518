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

/** Appends a cluster's cost unless it equals the last one kept (several channels' digests see the same price). */
const RECORD_CHANGE = `
local last = redis.call('lindex', KEYS[1], -1)
if last and string.sub(last, 1, #ARGV[1]) == ARGV[1] then
  redis.call('expire', KEYS[1], ARGV[4])
  return 0
end
redis.call('rpush', KEYS[1], ARGV[1] .. ARGV[2])
redis.call('ltrim', KEYS[1], -tonumber(ARGV[3]), -1)
redis.call('expire', KEYS[1], ARGV[4])
return 1`;

/**
 * The price history the charts draw, bounded and expiring: per channel its last {@link CHANNEL_POINTS} digests
 * (`<prefix>:digest:history:<channel>`, a list of JSON points), per cluster its last {@link CLUSTER_POINTS} cost
 * changes (`<prefix>:prices:history:<cluster>`, `ref|cost|at` strings). Both expire `keepDays` after their last
 * write, like requests after `retention_days`: a channel that unsubscribed or a cluster that went away leaves nothing.
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

  clusterKey(cluster: string): string {
    return `${this.prefix}:prices:history:${cluster}`;
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
    const pipeline = this.redis.pipeline();
    for (const [cluster, cost] of Object.entries(point.costs)) {
      pipeline.eval(
        RECORD_CHANGE,
        1,
        this.clusterKey(cluster),
        `${point.ref}|${cost}|`,
        point.at,
        String(CLUSTER_POINTS),
        String(this.ttlSeconds),
      );
    }
    await pipeline.exec();
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
    const raw = await this.redis.lrange(this.clusterKey(cluster), 0, -1);
    return raw.flatMap((entry) => {
      const [entryRef, cost, at] = entry.split('|');
      if (entryRef !== ref || !cost || !at) return [];
      return [{ at, ref, costs: { [cluster]: cost } }];
    });
  }
}
