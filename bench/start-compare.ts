/**
 * Cold start and idle memory of the bot as its own process: the compiled `dist/` that `npm start` runs now, against
 * the TypeScript through tsx that it ran before (with tsx's transform cache warm, and empty as in a new container).
 * Interleaved runs in one session, on a Redis of its own and the simulators; medians with min–max.
 *
 *   node --import tsx bench/start-compare.ts [--runs 7] [--settle-ms 2000]
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { freePort, startLocalRedis } from '../sim/local-redis.ts';
import { benchEnv } from './lib/bot.ts';
import { spawnReady } from './lib/child.ts';
import { BENCH, benchPolicyYaml } from './lib/identity.ts';
import { startSims } from './lib/sims.ts';
import { median } from './lib/stats.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const { values } = parseArgs({
  options: { runs: { type: 'string', default: '7' }, 'settle-ms': { type: 'string', default: '2000' } },
});
const runs = Number(values.runs);
const settleMs = Number(values['settle-ms']);

interface Variant {
  name: string;
  script: string;
  nodeArgs: string[];
  /** A fresh TMPDIR per start: tsx finds no cache, as in a new container. */
  freshTmp?: boolean;
}
const VARIANTS: Variant[] = [
  { name: 'compiled dist/ (npm start now)', script: 'dist/src/main.js', nodeArgs: [] },
  { name: 'tsx, warm cache (npm start before)', script: 'src/main.ts', nodeArgs: ['--import', 'tsx'] },
  {
    name: 'tsx, empty cache (a new container before)',
    script: 'src/main.ts',
    nodeArgs: ['--import', 'tsx'],
    freshTmp: true,
  },
];

execFileSync(process.execPath, ['scripts/build.mjs', '--if-stale'], { cwd: ROOT, stdio: 'inherit' });
const redis = await startLocalRedis();
const sims = await startSims({ botToken: BENCH.botToken, teamId: BENCH.teamId });
const dir = await mkdtemp(join(tmpdir(), 'cloudops-start-compare-'));
const policyFile = join(dir, 'policy.yml');
await writeFile(policyFile, benchPolicyYaml(sims.projectUuid));
const results = new Map<string, { coldStartMs: number[]; idleRssMb: number[]; stopMs: number[] }>(
  VARIANTS.map((v) => [v.name, { coldStartMs: [], idleRssMb: [], stopMs: [] }]),
);

async function once(variant: Variant, run: number): Promise<void> {
  const port = await freePort();
  const tmp = variant.freshTmp ? await mkdtemp(join(dir, 'tmp-')) : undefined;
  const env = {
    ...benchEnv(sims, {
      redisUrl: redis.url,
      prefix: `start-compare-${run}-${port}`,
      role: 'all',
      logLevel: 'warn',
      port,
      policyFile,
    }),
    ...(tmp ? { TMPDIR: tmp } : {}),
  };
  const child = await spawnReady({
    script: variant.script,
    nodeArgs: variant.nodeArgs,
    env,
    readyUrl: `http://127.0.0.1:${port}/readyz`,
    timeoutMs: 30_000,
    logFile: join(dir, 'children.log'),
    cwd: ROOT,
  });
  await new Promise((resolve) => setTimeout(resolve, settleMs));
  const rss = await child.rssMb();
  const stopped = await child.stop();
  const r = results.get(variant.name)!;
  r.coldStartMs.push(child.coldStartMs);
  r.idleRssMb.push(rss);
  r.stopMs.push(stopped.ms);
  process.stderr.write(
    `run ${run} ${variant.name}: ready ${child.coldStartMs.toFixed(0)} ms, idle RSS ${rss.toFixed(1)} MB, SIGTERM→exit ${stopped.ms.toFixed(0)} ms (code ${stopped.code})\n`,
  );
}

try {
  // Untimed warm-up of each: the OS file cache, and tsx's cache for the warm variant.
  for (const variant of VARIANTS) await once(variant, 0);
  for (const r of results.values()) for (const list of Object.values(r)) list.length = 0;
  for (let run = 1; run <= runs; run++) {
    // Interleaved, the order rotating each run, so drift in the machine's load spreads over all variants.
    const order = VARIANTS.map((_, i) => VARIANTS[(i + run) % VARIANTS.length]!);
    for (const variant of order) await once(variant, run);
  }
  const cell = (list: number[], digits: number) =>
    `${median(list).toFixed(digits)} (${Math.min(...list).toFixed(digits)}–${Math.max(...list).toFixed(digits)})`;
  const lines = [
    `Node ${process.version}, ${runs} interleaved runs, role all, medians (min–max):`,
    '',
    '| start | cold start to /readyz 200, ms | idle RSS after the settle, MB | SIGTERM to exit, ms |',
    '|---|---|---|---|',
    ...VARIANTS.map((v) => {
      const r = results.get(v.name)!;
      return `| ${v.name} | ${cell(r.coldStartMs, 0)} | ${cell(r.idleRssMb, 1)} | ${cell(r.stopMs, 0)} |`;
    }),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
} finally {
  await sims.close();
  await redis.stop();
  await rm(dir, { recursive: true, force: true });
}
