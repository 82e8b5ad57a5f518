/**
 * `npm run bench:charts`: how long one price chart takes to draw (SVG → PNG with resvg) and how much memory it adds,
 * in fresh processes (RUNS, default 7) of CHARTS charts each; the budget is 150 ms and 30 MB per chart. Writes
 * bench/charts-results.json.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { median, roundedSpread } from './lib/stats.ts';

const here = dirname(fileURLToPath(import.meta.url));
const RUNS = Number(process.env.RUNS ?? 7);
const BUDGET = { ms: 150, mb: 30 };

interface ChildFigures {
  firstMs: number;
  times: number[];
  pngBytes: number;
  extras: number[];
  rssBeforeMb: number;
  rssAfterMb: number;
  firstChartExtraMb: number;
}

const runs: ChildFigures[] = [];
for (let r = 0; r < RUNS; r++) {
  const out = execFileSync(
    process.execPath,
    ['--expose-gc', '--import', 'tsx', join(here, 'lib', 'chart-child.ts')],
    {
      env: process.env,
      encoding: 'utf8',
    },
  );
  runs.push(JSON.parse(out.trim().split('\n').at(-1) ?? '{}') as ChildFigures);
}
const warm = runs.map((r) => median(r.times));
const all = runs.flatMap((r) => r.times).sort((a, b) => a - b);
const result = {
  at: new Date().toISOString(),
  runs: RUNS,
  chartsPerRun: runs[0]?.times.length,
  msPerChart: roundedSpread(warm),
  msPerChartP95: Math.round(all[Math.floor(all.length * 0.95)] ?? Number.NaN),
  msFirstChartWithLoading: roundedSpread(runs.map((r) => r.firstMs)),
  mbPerChart: roundedSpread(runs.map((r) => median(r.extras))),
  mbPerChartMax: Math.round(Math.max(...runs.flatMap((r) => r.extras)) * 10) / 10,
  mbFirstChartWithLoading: roundedSpread(runs.map((r) => r.firstChartExtraMb)),
  mbProcessGrowthAfterAll: roundedSpread(runs.map((r) => r.rssAfterMb - r.rssBeforeMb)),
  pngBytes: runs[0]?.pngBytes,
  budget: BUDGET,
};
const ok = result.msPerChart.max <= BUDGET.ms && result.mbPerChartMax <= BUDGET.mb;
writeFileSync(join(here, 'charts-results.json'), `${JSON.stringify(result, null, 2)}\n`);
process.stdout.write(`${JSON.stringify(result, null, 2)}\n${ok ? 'within budget' : 'OVER BUDGET'}\n`);
process.exitCode = ok ? 0 : 1;
