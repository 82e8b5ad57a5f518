/**
 * One fresh process of `npm run bench:charts`: loads the drawing code, draws `CHARTS` distinct charts (no cache
 * hit: each history differs), and prints one JSON line: the first chart's time (module and font loading
 * included), each later chart's time, and the memory each added (peak RSS while it drew over the RSS before it).
 */
import { drawChart } from '../../src/charts/draw.ts';
import type { ChartPoint } from '../../src/charts/price-chart.ts';

const CHARTS = Number(process.env.CHARTS ?? 20);
const CLUSTERS = Number(process.env.CLUSTERS ?? 6);

/** Twelve digests of `CLUSTERS` clusters, the last price moved by `seed` so no two charts are the same. */
function history(seed: number): ChartPoint[] {
  return Array.from({ length: 12 }, (_, i) => ({
    at: new Date(Date.UTC(2026, 10, 15 + i, 8)).toISOString(),
    costs: Object.fromEntries(
      Array.from({ length: CLUSTERS }, (_, c) => [
        `zone-${c + 1}`,
        (40 + c * 1.7 + (i > 6 ? c * 0.3 : 0) + (i === 11 ? seed * 0.01 : 0)).toFixed(2),
      ]),
    ),
  }));
}

const input = (seed: number) => ({
  title: 'Reference VM, monthly cost per cluster',
  subtitle: '2 vCores (regular), 4 GB RAM, 50 GB disk, public IP · 730 h a month',
  currency: 'EUR',
  points: history(seed),
});

const mb = (bytes: number) => bytes / 1024 / 1024;
const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);

/** Draws one chart while sampling RSS every millisecond: its time and the most RSS it added over what was before. */
async function measured(seed: number): Promise<{ ms: number; extraMb: number; png: number }> {
  gc();
  const before = process.memoryUsage.rss();
  let peak = before;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 1);
  const t = performance.now();
  const chart = await drawChart(input(seed));
  const ms = performance.now() - t;
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage.rss());
  return { ms, extraMb: mb(peak - before), png: chart.png.length };
}

const rssBeforeMb = mb(process.memoryUsage.rss());
const first = await measured(0);
const later: { ms: number; extraMb: number }[] = [];
for (let i = 1; i <= CHARTS; i++) later.push(await measured(i));
process.stdout.write(
  `${JSON.stringify({
    firstMs: first.ms,
    firstChartExtraMb: first.extraMb,
    times: later.map((l) => l.ms),
    extras: later.map((l) => l.extraMb),
    pngBytes: first.png,
    rssBeforeMb,
    rssAfterMb: mb(process.memoryUsage.rss()),
  })}\n`,
);
