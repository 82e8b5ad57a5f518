import type { CloudApi, Cluster, PriceModel } from './types.ts';

/** Where cost previews get cluster prices from; a short cache keeps modals and messages fast. */
export interface PriceSource {
  /** Prices of one active cluster, or undefined when it is not listed. Throws when the API cannot be read. */
  clusterPrices(name: string): Promise<PriceModel | undefined>;
  /** All active clusters, as the list endpoint gives them. */
  clusters(): Promise<Cluster[]>;
}

/**
 * Caches the list endpoint (no auth, Shape B) for `ttlMs`. Concurrent callers share one request; a failed
 * fetch is not cached, so the next caller tries again.
 */
export function createPriceCache(
  api: Pick<CloudApi, 'listClusters'>,
  options: { ttlMs?: number; now?: () => number } = {},
): PriceSource {
  const ttlMs = options.ttlMs ?? 5 * 60_000;
  const now = options.now ?? Date.now;
  let cached: { at: number; clusters: Cluster[] } | undefined;
  let inFlight: Promise<Cluster[]> | undefined;

  const clusters = async (): Promise<Cluster[]> => {
    if (cached && now() - cached.at < ttlMs) return cached.clusters;
    inFlight ??= api
      .listClusters()
      .then((list) => {
        cached = { at: now(), clusters: list };
        return list;
      })
      .finally(() => {
        inFlight = undefined;
      });
    return inFlight;
  };

  return {
    clusters,
    async clusterPrices(name) {
      return (await clusters()).find((c) => c.name === name)?.prices;
    },
  };
}
