import type { Cluster, PriceModel } from '../cloud/types.ts';

/** The normalised price fields in display order, with the wire name used as a stable key. */
export const KNOWN_PRICE_FIELDS: readonly {
  key: string;
  prop: Exclude<keyof PriceModel, 'other'>;
  label: string;
}[] = [
  { key: 'vcore_regular', prop: 'vcoreRegular', label: 'vCore regular' },
  { key: 'vcore_light', prop: 'vcoreLight', label: 'vCore light' },
  { key: 'ram', prop: 'ram', label: 'RAM' },
  { key: 'storage_fast', prop: 'storageFast', label: 'Storage' },
  { key: 'public_ip', prop: 'publicIp', label: 'Public IP' },
  { key: 'vcore_off', prop: 'vcoreOff', label: 'vCore off' },
  { key: 'ram_off', prop: 'ramOff', label: 'RAM off' },
  { key: 'private_network_tag', prop: 'privateNetworkTag', label: 'Private network tag' },
];

/** The five prices every cluster line shows; the rest are "more prices". */
export const MAIN_PRICE_KEYS: readonly string[] = [
  'vcore_regular',
  'vcore_light',
  'ram',
  'storage_fast',
  'public_ip',
];

/** A readable name for a price field key; unknown wire names are shown as sent, with spaces. */
export function priceLabel(key: string): string {
  return KNOWN_PRICE_FIELDS.find((f) => f.key === key)?.label ?? key.replace(/_/g, ' ');
}

/** Every price of a cluster as `key → decimal string`, known fields first, unknown fields kept as sent. */
export function flattenPrices(prices: PriceModel): Record<string, string> {
  const out: Record<string, string> = {};
  for (const field of KNOWN_PRICE_FIELDS) {
    const value = prices[field.prop];
    if (value !== undefined) out[field.key] = value;
  }
  for (const [key, value] of Object.entries(prices.other)) {
    if (!(key in out)) out[key] = value;
  }
  return out;
}

/** A cluster as the digest remembers it between two runs. */
export interface ClusterSnapshot {
  name: string;
  location: string;
  prices: Record<string, string>;
}

/** What a channel's previous digest showed. */
export interface DigestSnapshot {
  /** When the digest was posted (ISO 8601). */
  at: string;
  clusters: ClusterSnapshot[];
}

/** The snapshot form of a list of clusters, sorted by name so diffs and messages are stable. */
export function toSnapshot(clusters: Cluster[], at: Date): DigestSnapshot {
  return {
    at: at.toISOString(),
    clusters: clusters
      .map((c) => ({ name: c.name, location: c.location, prices: flattenPrices(c.prices) }))
      .sort((a, b) => a.name.localeCompare(b.name, 'en')),
  };
}
