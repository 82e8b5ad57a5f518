import { runBareBullmq } from '../lib/bare-bullmq.ts';
import { type BenchBot, startBenchBot } from '../lib/bot.ts';
import { BENCH } from '../lib/identity.ts';
import { BOT_EXECUTE_CONCURRENCY, type PipelineResult, runPipeline } from '../lib/pipeline.ts';
import type { BenchContext, ScenarioResult } from '../lib/scenario.ts';
import { type Sims, startSims } from '../lib/sims.ts';
import { medianOf, round } from '../lib/stats.ts';

/** First VM id of the pipeline's own VMs in the simulator (one per request). */
const FIRST_VMID = 10_000;
/** Requests of the warm-up run. */
const WARMUP = 50;

type Figures = Omit<PipelineResult, 'states'>;

/**
 * Pipeline throughput: approved resizes of distinct VMs through queue → worker → simulator → notify → stand-in,
 * against bare BullMQ (no-op processor, same Redis, same concurrency, same number of jobs).
 */
export async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const cfg = ctx.config.pipeline;
  const concurrency = cfg.concurrency || BOT_EXECUTE_CONCURRENCY;
  let sims: Sims | undefined;
  let bot: BenchBot | undefined;
  try {
    sims = await startSims({
      botToken: BENCH.botToken,
      teamId: BENCH.teamId,
      seedVms: { count: cfg.requests, firstVmid: FIRST_VMID },
    });
    const prefix = ctx.newPrefix('pipeline');
    bot = await startBenchBot(sims, {
      redisUrl: ctx.redisUrl,
      prefix,
      role: 'all',
      logLevel: ctx.config.logLevel,
      logFile: ctx.logFile,
    });
    // CPU time of this process (the bot, in-process) per request: far less swayed by other load than rates are.
    const cpuMs: { bot: number[]; bare: number[] } = { bot: [], bare: [] };
    const timed = async <T>(into: number[], count: number, work: () => Promise<T>): Promise<T> => {
      const before = process.cpuUsage();
      const result = await work();
      const used = process.cpuUsage(before);
      into.push((used.user + used.system) / 1000 / count);
      return result;
    };
    const push = (count: number) =>
      runPipeline({
        redis: ctx.redis,
        prefix,
        sims: sims as Sims,
        count,
        vmidOf: (i) => FIRST_VMID + i,
        timeoutMs: cfg.timeoutMs,
        log: ctx.log,
      });
    const bare = (count: number) =>
      runBareBullmq({
        connection: ctx.redis,
        prefix: ctx.newPrefix('bare-bullmq'),
        count,
        concurrency,
        timeoutMs: cfg.timeoutMs,
      });

    ctx.log('pipeline: warm-up');
    await push(Math.min(WARMUP, cfg.requests));
    await bare(Math.min(WARMUP, cfg.requests));

    const botRuns: PipelineResult[] = [];
    const bareRuns: Awaited<ReturnType<typeof bare>>[] = [];
    for (let r = 1; r <= ctx.config.runs; r++) {
      botRuns.push(await timed(cpuMs.bot, cfg.requests, () => push(cfg.requests)));
      bareRuns.push(await timed(cpuMs.bare, cfg.requests, () => bare(cfg.requests)));
      ctx.log(
        `pipeline: run ${r}: cloudops ${round(botRuns.at(-1)?.perSecond ?? 0)}/s, bare BullMQ ${round(bareRuns.at(-1)?.perSecond ?? 0)}/s`,
      );
    }
    const botMedian = medianOf(botRuns.map(({ states: _states, ...figures }): Figures => figures));
    const bareMedian = medianOf(bareRuns);
    const cloud = await sims.cloudSummary();
    const slack = await sims.slackSummary();
    const ratio = botMedian.perSecond / bareMedian.perSecond;
    const medianMs = (values: number[]) =>
      [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
    const cpu = { bot: medianMs(cpuMs.bot), bare: medianMs(cpuMs.bare) };
    const allSucceeded = botRuns.every((r) => (r.states.succeeded ?? 0) === r.requests);
    return {
      rows: [
        {
          scenario: `pipeline ${cfg.requests} resizes`,
          target: 'cloudops',
          figures: {
            per_s: round(botMedian.perSecond),
            seconds: round(botMedian.elapsedMs / 1000),
            wait_p50_ms: round(botMedian.executeWaitP50Ms),
            wait_p99_ms: round(botMedian.executeWaitP99Ms),
            notify_wait_p99_ms: round(botMedian.notifyWaitP99Ms),
            cpu_ms_per_req: round(cpu.bot, 2),
          },
        },
        {
          scenario: `pipeline ${cfg.requests} resizes`,
          target: 'bare bullmq no-op',
          figures: {
            per_s: round(bareMedian.perSecond),
            seconds: round(bareMedian.elapsedMs / 1000),
            wait_p50_ms: round(bareMedian.waitP50Ms),
            wait_p99_ms: round(bareMedian.waitP99Ms),
            cpu_ms_per_req: round(cpu.bare, 2),
          },
        },
      ],
      data: {
        concurrency,
        cpuMsPerRequest: cpuMs,
        cloudops: { runs: botRuns, median: botMedian },
        bareBullmq: { runs: bareRuns, median: bareMedian },
        cloud,
        slack,
      },
      checks: [
        {
          name: 'pipeline: every request succeeded and got its reply',
          ok: allSucceeded,
          detail: botRuns.map((r) => JSON.stringify(r.states)).join(' '),
        },
        {
          name: 'pipeline: no overlapping mutation on a VM',
          ok: cloud.overlaps === 0,
          detail: `${cloud.overlaps} overlaps in ${cloud.applied} applied changes`,
        },
        {
          name: 'pipeline: the Slack stand-in saw no invalid call',
          ok: slack.problems === 0,
          detail: slack.problems === 0 ? 'none' : slack.firstProblems.join('; '),
        },
      ],
      targets: [
        {
          name: 'pipeline: at least 1/4 of bare BullMQ no-op rate',
          ok: ratio >= 0.25,
          detail: `${round(botMedian.perSecond)}/s vs ${round(bareMedian.perSecond)}/s (${round(ratio * 100)}%)`,
        },
      ],
    };
  } finally {
    await bot?.stop().catch((error: Error) => ctx.log(`pipeline: bot stop: ${error.message}`));
    await sims?.close();
  }
}
