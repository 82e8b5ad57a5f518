import { Decimal, DecimalError, percentChange } from '../rules/decimal.ts';
import { type ClusterSnapshot, type DigestSnapshot, priceLabel } from './price-fields.ts';

/** One price that moved between two digests. `percent` is absent when the old price was 0 or not a number. */
export interface PriceChange {
  cluster: string;
  key: string;
  label: string;
  before?: string;
  after?: string;
  direction: 'up' | 'down' | 'new' | 'gone' | 'changed';
  /** Signed, one decimal, e.g. "+10.0" or "-2.5". */
  percent?: string;
}

/** What changed since a channel's previous digest. */
export interface DigestDiff {
  /** False on a channel's first digest: there is nothing to compare with. */
  hasPrevious: boolean;
  since?: string;
  added: ClusterSnapshot[];
  removed: ClusterSnapshot[];
  changes: PriceChange[];
}

function parseOrUndefined(text: string): Decimal | undefined {
  try {
    return Decimal.parse(text);
  } catch (error) {
    if (error instanceof DecimalError) return undefined;
    throw error;
  }
}

/** Compares one price; undefined when it did not change (0.010 and 0.01 are the same price). */
export function comparePrice(
  cluster: string,
  key: string,
  before?: string,
  after?: string,
): PriceChange | undefined {
  const base = { cluster, key, label: priceLabel(key), before, after };
  if (before === undefined && after === undefined) return undefined;
  if (before === undefined) return { ...base, direction: 'new' };
  if (after === undefined) return { ...base, direction: 'gone' };
  const b = parseOrUndefined(before);
  const a = parseOrUndefined(after);
  if (!b || !a) return before === after ? undefined : { ...base, direction: 'changed' };
  const order = a.compare(b);
  if (order === 0) return undefined;
  const pct = percentChange(b, a, 1);
  return {
    ...base,
    direction: order > 0 ? 'up' : 'down',
    percent: pct === undefined ? undefined : order > 0 ? `+${pct}` : pct,
  };
}

/** New and removed clusters and every price that moved, in cluster then field order. */
export function diffSnapshots(previous: DigestSnapshot | undefined, current: DigestSnapshot): DigestDiff {
  if (!previous) return { hasPrevious: false, added: [], removed: [], changes: [] };
  const before = new Map(previous.clusters.map((c) => [c.name, c]));
  const after = new Map(current.clusters.map((c) => [c.name, c]));
  const added = current.clusters.filter((c) => !before.has(c.name));
  const removed = previous.clusters.filter((c) => !after.has(c.name));
  const changes: PriceChange[] = [];
  for (const cluster of current.clusters) {
    const old = before.get(cluster.name);
    if (!old) continue;
    const keys = [
      ...Object.keys(cluster.prices),
      ...Object.keys(old.prices).filter((k) => !(k in cluster.prices)),
    ];
    for (const key of keys) {
      const change = comparePrice(cluster.name, key, old.prices[key], cluster.prices[key]);
      if (change) changes.push(change);
    }
  }
  return { hasPrevious: true, since: previous.at, added, removed, changes };
}
