import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { ensureRedis, startLocalRedis } from '../sim/local-redis.ts';
import { type BenchConfig, parseConfig, SCENARIOS, type ScenarioName } from './lib/config.ts';
import { deleteKeys } from './lib/redis-keys.ts';
import type { BenchContext, Check, Scenario, ScenarioResult } from './lib/scenario.ts';
import { round, type Spread } from './lib/stats.ts';
import { type Row, renderTable } from './lib/table.ts';

/** The whole bench stops by itself after this, whatever hangs. */
const HARD_LIMIT_MS = { quick: 10 * 60_000, full: 45 * 60_000 };
/** One scenario may take at most this long. */
const SCENARIO_LIMIT_MS = { quick: 4 * 60_000, full: 8 * 60_000 };

interface Outcome {
  name: ScenarioName;
  ms: number;
  result?: ScenarioResult;
  error?: string;
}

function withLimit<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`${what} did not finish within ${Math.round(ms / 1000)} s`)),
        ms,
      );
    }),
  ]).finally(() => clearTimeout(timer));
}

async function runScenario(name: ScenarioName, ctx: BenchContext, config: BenchConfig): Promise<Outcome> {
  const started = performance.now();
  try {
    // Imported one by one, so a scenario whose modules are missing fails alone.
    const mod = (await import(`./scenarios/${name}.ts`)) as { run: Scenario };
    const result = await withLimit(
      mod.run(ctx),
      name === 'steady'
        ? config.steady.limitMs
        : config.quick
          ? SCENARIO_LIMIT_MS.quick
          : SCENARIO_LIMIT_MS.full,
      name,
    );
    return { name, ms: performance.now() - started, result };
  } catch (error) {
    return { name, ms: performance.now() - started, error: (error as Error).stack ?? String(error) };
  }
}

const cell = (s: Spread | undefined, unit = '') =>
  s === undefined ? '' : `${showNumber(s.median)}${unit} (${showNumber(s.min)}–${showNumber(s.max)})`;
const showNumber = (v: number) => {
  const digits = Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : Math.abs(v) >= 1 ? 2 : 3;
  return String(round(v, digits));
};

/** One line of the issue-targets table. */
function targetRow(t: Check): Row {
  return {
    scenario: t.name,
    target: t.ok ? 'met' : 'MISSED',
    figures: {
      cloudops: cell(t.figure, t.unit ?? ''),
      baseline: cell(t.baseline, t.unit ?? ''),
      ratio: cell(t.ratio, '×'),
      limit: t.limit ?? '',
    },
  };
}

function machine() {
  return {
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    cpus: availableParallelism(),
    // Other work on the machine skews every figure; the load average at the start says how much there was.
    loadAverageAtStart: loadavg().map((l) => Math.round(l * 100) / 100),
  };
}

async function main(): Promise<number> {
  let config: BenchConfig;
  try {
    config = parseConfig(process.argv.slice(2), process.env);
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    return 2;
  }
  const hardLimit = setTimeout(
    () => {
      process.stderr.write('bench: hard time limit reached, stopping\n');
      process.exit(3);
    },
    config.quick ? HARD_LIMIT_MS.quick : HARD_LIMIT_MS.full,
  );
  hardLimit.unref();

  // A shared Redis also serves other people's tests; --own-redis keeps their load out of the figures.
  const machineAtStart = machine();
  const found = config.ownRedis
    ? await startLocalRedis().then((started) => ({ url: started.url, started }))
    : await ensureRedis(config.redisUrl);
  const redis = new Redis(found.url, { maxRetriesPerRequest: null });
  const runId = randomUUID().slice(0, 8);
  const prefixes: string[] = [];
  const logFile = join(tmpdir(), `cloudops-bench-${runId}.log`);
  const log = (message: string) =>
    process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
  const ctx: BenchContext = {
    config,
    redisUrl: found.url,
    redis,
    newPrefix(name) {
      const prefix = `cloudops-bench-${runId}-${name}-${prefixes.length}`;
      prefixes.push(prefix);
      return prefix;
    },
    productLengthPrefix() {
      const prefix = `b${runId.slice(0, 4)}${prefixes.length.toString(36).padStart(3, '0')}`;
      prefixes.push(prefix);
      return prefix;
    },
    logFile,
    log,
  };
  log(`redis ${found.started ? `started on ${found.url}` : `at ${found.url}`}; bot logs in ${logFile}`);

  const selected = config.only.length > 0 ? SCENARIOS.filter((s) => config.only.includes(s)) : [...SCENARIOS];
  const outcomes: Outcome[] = [];
  for (const name of selected) {
    log(`scenario ${name}: start`);
    const outcome = await runScenario(name, ctx, config);
    log(`scenario ${name}: ${outcome.error ? 'FAILED' : 'done'} in ${Math.round(outcome.ms / 1000)} s`);
    if (outcome.error) log(outcome.error);
    outcomes.push(outcome);
    for (const prefix of prefixes.splice(0)) await deleteKeys(redis, prefix).catch(() => undefined);
  }

  const checks: Check[] = outcomes.flatMap((o) => o.result?.checks ?? []);
  const targets: Check[] = outcomes.flatMap((o) => o.result?.targets ?? []);
  const failedScenarios = outcomes.filter((o) => o.error);

  const out = process.stdout;
  out.write(
    `\ncloudops bench${config.quick ? ' (--quick)' : ''}: median of ${config.runs} run(s) after a warm-up\n\n`,
  );
  // One table per scenario: their figures differ.
  for (const o of outcomes) {
    const rows: Row[] = o.result?.rows ?? [];
    if (rows.length > 0) out.write(`${renderTable(rows)}\n\n`);
  }
  out.write('Correctness checks (fail the bench):\n');
  for (const c of checks) out.write(`  ${c.ok ? 'PASS' : 'FAIL'}  ${c.name}: ${c.detail}\n`);
  for (const o of failedScenarios)
    out.write(`  FAIL  scenario ${o.name} did not complete: ${o.error?.split('\n')[0]}\n`);
  const issue = targets.filter((t) => t.limit !== undefined);
  if (issue.length > 0) {
    out.write(
      `\nTargets: median (min–max) over ${config.pairs} interleaved bot/baseline pairs; ratio per pair\n`,
    );
    out.write(`${renderTable(issue.map(targetRow), ['target', 'verdict'])}\n\n`);
  }
  out.write('Targets (reported only):\n');
  for (const t of targets) {
    out.write(`  ${t.ok ? 'met ' : 'MISS'}  ${t.name}: ${t.detail}\n`);
    if (!t.ok && t.whyMissed) out.write(`        why: ${t.whyMissed}\n`);
  }

  const results = {
    generatedAt: new Date().toISOString(),
    quick: config.quick,
    runs: config.runs,
    config,
    machine: machineAtStart,
    scenarios: Object.fromEntries(
      outcomes.map((o) => [
        o.name,
        o.result
          ? { seconds: Math.round(o.ms / 100) / 10, ...o.result }
          : { seconds: Math.round(o.ms / 100) / 10, error: o.error },
      ]),
    ),
  };
  const path = config.out ?? new URL('./results.json', import.meta.url).pathname;
  await writeFile(path, `${JSON.stringify({ ...results, targets }, null, 2)}\n`);
  out.write(`\nwrote ${path}\n`);

  await redis.quit().catch(() => redis.disconnect());
  await found.started?.stop();
  const failed = failedScenarios.length > 0 || checks.some((c) => !c.ok);
  return failed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error: Error) => {
    process.stderr.write(`bench: ${error.stack ?? error.message}\n`);
    process.exit(1);
  },
);
