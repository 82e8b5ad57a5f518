import { type BareBullmqResult, runBareBullmq } from '../lib/bare-bullmq.ts';
import { type BenchBot, startBenchBot } from '../lib/bot.ts';
import { BENCH } from '../lib/identity.ts';
import { BOT_EXECUTE_CONCURRENCY, type PipelineResult, runPipeline } from '../lib/pipeline.ts';
import type { BenchContext, ScenarioResult } from '../lib/scenario.ts';
import { type Sims, startSims } from '../lib/sims.ts';
import { median, round } from '../lib/stats.ts';

/** First VM id of the fairness VMs in the simulator. */
const FIRST_VMID = 20_000;

/**
 * Per-VM fairness: many requests over few VMs with a slow API. No two mutations of one VM may overlap, and the total
 * time is compared with the ideal: max(per-VM serial time, all calls spread over the worker's concurrency).
 */
export async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const cfg = ctx.config.fairness;
  const concurrency = ctx.config.pipeline.concurrency || BOT_EXECUTE_CONCURRENCY;
  let sims: Sims | undefined;
  let bot: BenchBot | undefined;
  try {
    sims = await startSims({
      botToken: BENCH.botToken,
      teamId: BENCH.teamId,
      seedVms: { count: cfg.vms, firstVmid: FIRST_VMID },
    });
    // Every resize call takes latencyMs on the simulator, for all runs (retries included).
    await sims.cloudLatency(cfg.latencyMs, cfg.requests * (ctx.config.runs * 2 + 1) * 3 + 100);
    const prefix = ctx.newPrefix('fairness');
    bot = await startBenchBot(sims, {
      redisUrl: ctx.redisUrl,
      prefix,
      role: 'all',
      logLevel: ctx.config.logLevel,
      logFile: ctx.logFile,
    });
    const perVm = Math.ceil(cfg.requests / cfg.vms);
    const idealMs = Math.max(
      perVm * cfg.latencyMs,
      (cfg.requests * cfg.latencyMs) / Math.min(concurrency, cfg.vms),
    );
    const runs: PipelineResult[] = [];
    for (let r = 1; r <= ctx.config.runs; r++) {
      runs.push(
        await runPipeline({
          redis: ctx.redis,
          prefix,
          sims,
          count: cfg.requests,
          vmidOf: (i) => FIRST_VMID + (i % cfg.vms),
          timeoutMs: cfg.timeoutMs,
          log: ctx.log,
        }),
      );
      ctx.log(
        `fairness: run ${r}: ${round((runs.at(-1)?.elapsedMs ?? 0) / 1000)} s (ideal ${round(idealMs / 1000)} s)`,
      );
    }
    const cloud = await sims.cloudSummary();

    // Baseline: the same calls from a bare BullMQ worker (same concurrency, own process), with no per-VM lock.
    const bareRuns: BareBullmqResult[] = [];
    for (let r = 1; r <= ctx.config.runs; r++) {
      bareRuns.push(
        await runBareBullmq({
          redisUrl: ctx.redisUrl,
          prefix: ctx.newPrefix('fairness-bare'),
          count: cfg.requests,
          concurrency,
          timeoutMs: cfg.timeoutMs,
          work: {
            cloudUrl: sims.cloudUrl,
            apiKey: sims.cloudApiKey,
            projectUuid: sims.projectUuid,
            firstVmid: FIRST_VMID,
            vms: cfg.vms,
          },
        }),
      );
    }
    const bareOverlaps = (await sims.cloudSummary()).overlaps - cloud.overlaps;
    const bareElapsed = median(bareRuns.map((r) => r.elapsedMs));
    const elapsed = median(runs.map((r) => r.elapsedMs));
    const ratio = elapsed / idealMs;
    return {
      rows: [
        {
          scenario: `fairness ${cfg.requests} over ${cfg.vms} VMs`,
          target: 'cloudops',
          figures: {
            seconds: round(elapsed / 1000),
            ideal_s: round(idealMs / 1000),
            x_ideal: round(ratio, 2),
            overlaps: cloud.overlaps,
            wait_p99_ms: round(median(runs.map((r) => r.executeWaitP99Ms))),
          },
        },
        {
          scenario: `fairness ${cfg.requests} over ${cfg.vms} VMs`,
          target: 'bare bullmq, no lock',
          figures: {
            seconds: round(bareElapsed / 1000),
            ideal_s: round(idealMs / 1000),
            x_ideal: round(bareElapsed / idealMs, 2),
            overlaps: bareOverlaps,
            wait_p99_ms: round(median(bareRuns.map((r) => r.waitP99Ms))),
          },
        },
      ],
      data: {
        latencyMs: cfg.latencyMs,
        concurrency,
        idealMs,
        runs,
        medianElapsedMs: elapsed,
        cloud,
        bareBullmqNoLock: { runs: bareRuns, medianElapsedMs: bareElapsed, overlaps: bareOverlaps },
      },
      checks: [
        {
          name: 'fairness: no overlapping mutation on a VM',
          ok: cloud.overlaps === 0,
          detail: `${cloud.overlaps} overlaps in ${cloud.applied} applied changes`,
        },
        {
          name: 'fairness: every request succeeded',
          ok: runs.every((r) => (r.states.succeeded ?? 0) === r.requests),
          detail: runs.map((r) => JSON.stringify(r.states)).join(' '),
        },
      ],
      targets: [
        {
          name: 'fairness: total time close to the ideal (within 2x)',
          ok: ratio <= 2,
          detail: `${round(elapsed / 1000)} s vs ideal ${round(idealMs / 1000)} s (${cfg.latencyMs} ms per call, ${perVm} calls per VM, concurrency ${concurrency})`,
        },
      ],
    };
  } finally {
    await bot?.stop().catch((error: Error) => ctx.log(`fairness: bot stop: ${error.message}`));
    await sims?.close();
  }
}
