import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../sim/local-redis.ts';
import { benchEnv } from '../lib/bot.ts';
import { type ReadyChild, spawnReady } from '../lib/child.ts';
import { BENCH, benchPolicyYaml } from '../lib/identity.ts';
import { runPipeline } from '../lib/pipeline.ts';
import type { BenchContext, ScenarioResult } from '../lib/scenario.ts';
import { type Sims, startSims } from '../lib/sims.ts';
import { START_NODE_ARGS } from '../lib/start-args.ts';
import { median, round } from '../lib/stats.ts';

/** First VM id of the footprint pipeline's VMs in the simulator. */
const FIRST_VMID = 30_000;
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

interface BotRun {
  coldStartMs: number;
  idleRssMb: number;
  afterPipelineRssMb: number;
  pipelinePerSecond: number;
  sigtermExitCode: number | null;
  sigtermMs: number;
}

interface BareRun {
  coldStartMs: number;
  idleRssMb: number;
}

/** The roles a process can run alone, each measured idle on its own. */
const ROLES = ['web', 'worker', 'scheduler'] as const;
/** Issue 29: the compiled bot idle within 1.15× a bare compiled Bolt + BullMQ app. */
const IDLE_RATIO_LIMIT = 1.15;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Footprint: the compiled bot, `node <npm start's flags> dist/src/main.js` as its own process, against the
 * simulators: spawn → GET /readyz 200, resident memory idle and after a pipeline run, and SIGTERM → exit; then each
 * role alone, idle. Baseline: a bare Bolt app plus a bare BullMQ worker in a process of their own, also run without
 * a loader (Node strips its types) and with the same flags. Bot and baseline alternate within each run.
 */
export async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const cfg = ctx.config.footprint;
  let sims: Sims | undefined;
  const dir = await mkdtemp(join(tmpdir(), 'cloudops-bench-footprint-'));
  const children: ReadyChild[] = [];
  try {
    sims = await startSims({
      botToken: BENCH.botToken,
      teamId: BENCH.teamId,
      seedVms: { count: cfg.pipelineRequests, firstVmid: FIRST_VMID },
    });
    const activeSims = sims;
    const policyFile = join(dir, 'policy.yml');
    await writeFile(policyFile, benchPolicyYaml(sims.projectUuid));

    // The compiled bot, as production runs it: build dist/ first when the sources are newer.
    execFileSync(process.execPath, ['scripts/build.mjs', '--if-stale'], { cwd: ROOT, stdio: 'inherit' });
    const startBot = async (role: 'all' | (typeof ROLES)[number] = 'all') => {
      const port = await freePort();
      const prefix = ctx.newPrefix('footprint');
      const env = benchEnv(activeSims, {
        redisUrl: ctx.redisUrl,
        prefix,
        role,
        logLevel: ctx.config.logLevel,
        port,
        policyFile,
      });
      const child = await spawnReady({
        script: 'dist/src/main.js',
        nodeArgs: START_NODE_ARGS,
        env,
        readyUrl: `http://127.0.0.1:${port}/readyz`,
        timeoutMs: cfg.readyTimeoutMs,
        logFile: ctx.logFile,
        cwd: ROOT,
      });
      children.push(child);
      return { child, prefix };
    };
    const startBare = async () => {
      const port = await freePort();
      const child = await spawnReady({
        script: 'bench/lib/bare-app-main.ts',
        nodeArgs: START_NODE_ARGS,
        env: { PORT: String(port), REDIS_URL: ctx.redisUrl, REDIS_PREFIX: ctx.newPrefix('footprint-bare') },
        readyUrl: `http://127.0.0.1:${port}/readyz`,
        timeoutMs: cfg.readyTimeoutMs,
        logFile: ctx.logFile,
        cwd: ROOT,
      });
      children.push(child);
      return child;
    };

    ctx.log('footprint: warm-up start (untimed)');
    await (await startBot()).child.stop();
    await (await startBare()).stop();

    const botRuns: BotRun[] = [];
    const bareRuns: BareRun[] = [];
    const roleRss: Record<(typeof ROLES)[number], number[]> = { web: [], worker: [], scheduler: [] };
    for (let r = 1; r <= ctx.config.runs; r++) {
      const { child, prefix } = await startBot();
      await sleep(cfg.settleMs);
      const idleRssMb = await child.rssMb();
      const pipeline = await runPipeline({
        redis: ctx.redis,
        prefix,
        sims: activeSims,
        count: cfg.pipelineRequests,
        vmidOf: (i) => FIRST_VMID + i,
        timeoutMs: ctx.config.pipeline.timeoutMs,
        log: ctx.log,
      });
      await sleep(cfg.settleMs);
      const afterPipelineRssMb = await child.rssMb();
      const stopped = await child.stop();
      botRuns.push({
        coldStartMs: child.coldStartMs,
        idleRssMb,
        afterPipelineRssMb,
        pipelinePerSecond: pipeline.perSecond,
        sigtermExitCode: stopped.code,
        sigtermMs: stopped.ms,
      });

      const bare = await startBare();
      await sleep(cfg.settleMs);
      bareRuns.push({ coldStartMs: bare.coldStartMs, idleRssMb: await bare.rssMb() });
      await bare.stop();
      for (const role of ROLES) {
        const { child: alone } = await startBot(role);
        await sleep(cfg.settleMs);
        roleRss[role].push(await alone.rssMb());
        await alone.stop();
      }
      ctx.log(
        `footprint: run ${r}: ${JSON.stringify(botRuns.at(-1))} bare ${JSON.stringify(bareRuns.at(-1))}`,
      );
    }

    const m = (values: number[]) => median(values);
    const idleRatios = botRuns.map((r, i) => r.idleRssMb / (bareRuns[i]?.idleRssMb ?? Number.NaN));
    const bot = {
      coldStartMs: m(botRuns.map((r) => r.coldStartMs)),
      idleRssMb: m(botRuns.map((r) => r.idleRssMb)),
      afterPipelineRssMb: m(botRuns.map((r) => r.afterPipelineRssMb)),
    };
    const bare = {
      coldStartMs: m(bareRuns.map((r) => r.coldStartMs)),
      idleRssMb: m(bareRuns.map((r) => r.idleRssMb)),
    };
    return {
      rows: [
        {
          scenario: 'footprint (own process)',
          target: 'cloudops',
          figures: {
            cold_start_ms: round(bot.coldStartMs),
            idle_rss_mb: round(bot.idleRssMb),
            rss_after_pipeline_mb: round(bot.afterPipelineRssMb),
          },
        },
        {
          scenario: 'footprint (own process)',
          target: 'bare bolt+bullmq',
          figures: { cold_start_ms: round(bare.coldStartMs), idle_rss_mb: round(bare.idleRssMb) },
        },
        ...ROLES.map((role) => ({
          scenario: 'footprint (own process)',
          target: `cloudops ROLE=${role} alone`,
          figures: { idle_rss_mb: round(m(roleRss[role])) },
        })),
      ],
      data: {
        pipelineRequests: cfg.pipelineRequests,
        settleMs: cfg.settleMs,
        cloudops: { runs: botRuns, median: bot },
        bare: { runs: bareRuns, median: bare },
        roles: roleRss,
        idleRatios,
      },
      checks: [],
      targets: [
        {
          name: 'footprint: idle memory under 150 MB',
          ok: bot.idleRssMb < 150,
          detail: `${round(bot.idleRssMb)} MB RSS (bare ${round(bare.idleRssMb)} MB)`,
        },
        {
          name: `footprint: idle RSS within ${IDLE_RATIO_LIMIT}× bare Bolt + BullMQ (both compiled)`,
          ok: m(idleRatios) <= IDLE_RATIO_LIMIT,
          detail: `${round(m(idleRatios), 2)}× (${round(Math.min(...idleRatios), 2)}–${round(Math.max(...idleRatios), 2)}); roles alone: ${ROLES.map((r) => `${r} ${round(m(roleRss[r]))} MB`).join(', ')}`,
        },
        {
          name: 'footprint: SIGTERM exits 0',
          ok: botRuns.every((r) => r.sigtermExitCode === 0),
          detail: botRuns.map((r) => `code ${r.sigtermExitCode} in ${round(r.sigtermMs)} ms`).join(', '),
        },
      ],
    };
  } finally {
    for (const child of children) await child.stop(3000).catch(() => undefined);
    await sims?.close();
    await rm(dir, { recursive: true, force: true });
  }
}
