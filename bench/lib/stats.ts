/** Latency figures of one run, in milliseconds. */
export interface LatencySummary {
  count: number;
  p50: number;
  p99: number;
  max: number;
  /** How many took longer than Slack's 3-second limit. */
  over3s: number;
  /** Answers that were not HTTP 200 (or never came). */
  errors: number;
}

/** Nearest-rank percentile of an ascending array; NaN for an empty one. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

/** Median of any array (the mean of the middle two for an even count); NaN for an empty one. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** p50/p99/max/over-3 s of latencies; `errors` is passed through. */
export function summarizeLatencies(latenciesMs: readonly number[], errors = 0): LatencySummary {
  const sorted = [...latenciesMs].sort((a, b) => a - b);
  return {
    count: sorted.length,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted.length > 0 ? sorted[sorted.length - 1]! : Number.NaN,
    over3s: sorted.filter((v) => v > 3000).length,
    errors,
  };
}

/** The per-field median of several runs' summaries (each figure's own median, as the table shows). */
export function medianOf<T extends { [K in keyof T]: number }>(runs: readonly T[]): T {
  const first = runs[0];
  if (!first) throw new Error('medianOf needs at least one run');
  const out = { ...first };
  for (const key of Object.keys(first) as (keyof T)[])
    out[key] = median(runs.map((r) => r[key])) as T[keyof T];
  return out;
}

/** Rounds for display and JSON: integers stay, others keep `digits` decimals. */
export function round(value: number, digits = 1): number {
  if (!Number.isFinite(value)) return value;
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** Median and range of several runs' values: the noise a figure comes with. */
export interface Spread {
  median: number;
  min: number;
  max: number;
  runs: number[];
}

export function spread(values: readonly number[]): Spread {
  return {
    median: median(values),
    min: values.length > 0 ? Math.min(...values) : Number.NaN,
    max: values.length > 0 ? Math.max(...values) : Number.NaN,
    runs: [...values],
  };
}

/** Median and range of a series rounded to 0.1, with how many values it had: what the results files store. */
export function roundedSpread(values: readonly number[]): {
  median: number;
  min: number;
  max: number;
  runs: number;
} {
  return {
    median: round(median(values)),
    min: round(Math.min(...values)),
    max: round(Math.max(...values)),
    runs: values.length,
  };
}

/** `median (min–max)` for tables and target details. */
export function showSpread(s: Spread, digits = 2, unit = ''): string {
  return `${round(s.median, digits)}${unit} (${round(s.min, digits)}–${round(s.max, digits)})`;
}
