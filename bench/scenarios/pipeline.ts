import { type BareBullmq, type BareBullmqResult, startBareBullmq } from '../lib/bare-bullmq.ts';
import {
  type BareFlow,
  type BareFlowPipelineResult,
  runBareFlowPipeline,
  startBareFlow,
} from '../lib/bare-flow.ts';
import { type BenchBot, startBenchBot } from '../lib/bot.ts';
import { BENCH } from '../lib/identity.ts';
import { BOT_EXECUTE_CONCURRENCY, type PipelineResult, runPipeline } from '../lib/pipeline.ts';
import type { BenchContext, ScenarioResult } from '../lib/scenario.ts';
import { type Sims, startSims } from '../lib/sims.ts';
import { round, showSpread, spread } from '../lib/stats.ts';

/** First VM id of the pipeline's own VMs in the simulator (one per request: the bare app's, then the bot's runs'). */
const FIRST_VMID = 10_000;
/** Requests of the warm-up run: enough for a fresh process's hot paths to be optimised (JIT). */
const WARMUP = 500;
/** CPU per approved request in the bot's process (the third round's target; 1.0 ms before). */
const CPU_TARGET_MS = 0.8;
/** How long the bare Bolt + BullMQ app may take to answer `/readyz` after it is spawned. */
const BARE_FLOW_READY_MS = 30_000;

/**
 * Pipeline: approved resizes of distinct VMs through queue → execute worker → simulator → notify → thread reply,
 * the bot alone in its process (ROLE=all), CPU counted from that process only, first enqueue to last reply.
 * Baseline: bare BullMQ in a process of its own, two no-op hops per job (add → process → add → process, as an
 * approved request is an execute job and a notify job), same concurrency, jobs added from the bench process.
 * Beside it, the bare Bolt + BullMQ app (bench/lib/bare-flow-main.ts) given the same number of jobs as its Approve
 * clicks would add them: its worker POSTs each resize and replies in the thread, nothing else (no request read, no
 * lock, no marker, no message update), so its CPU per job is the floor of an approved request on Bolt and BullMQ.
 * Interleaved; each ratio is one round's.
 */
export async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const cfg = ctx.config.pipeline;
  const concurrency = cfg.concurrency || BOT_EXECUTE_CONCURRENCY;
  let sims: Sims | undefined;
  let bot: BenchBot | undefined;
  let bare: BareBullmq | undefined;
  let flow: BareFlow | undefined;
  try {
    sims = await startSims({
      botToken: BENCH.botToken,
      teamId: BENCH.teamId,
      // The bare app's VMs (used again by each of its runs), then fresh ones for each run of the bot.
      seedVms: { count: (ctx.config.pairs + 2) * cfg.requests, firstVmid: FIRST_VMID },
    });
    const prefix = ctx.newPrefix('pipeline');
    bot = await startBenchBot(sims, {
      redisUrl: ctx.redisUrl,
      prefix,
      role: 'all',
      logLevel: ctx.config.logLevel,
      logFile: ctx.logFile,
    });
    bare = await startBareBullmq({
      redisUrl: ctx.redisUrl,
      prefix: ctx.newPrefix('pipeline-bare'),
      concurrency,
      hops: 2,
    });
    const flowPrefix = ctx.newPrefix('pipeline-bare-flow');
    flow = await startBareFlow({
      sims,
      redisUrl: ctx.redisUrl,
      prefix: flowPrefix,
      readyTimeoutMs: BARE_FLOW_READY_MS,
      logFile: ctx.logFile,
      // Node's defaults, as the bot runs here.
      nodeArgs: [],
    });
    const activeBot = bot;
    const activeBare = bare;
    const activeFlow = flow;
    const activeSims = sims;
    // Each run of the bot resizes VMs it has not changed before: it checks a request against what it knows of the
    // VM before counting an approval and before sending, and a request made before an earlier run changed the VM no
    // longer stands.
    let nextVmid = FIRST_VMID + cfg.requests;
    const push = (count: number) => {
      const first = nextVmid;
      nextVmid += count;
      return runPipelineOn(count, (i) => first + i);
    };
    const runPipelineOn = (count: number, vmidOf: (i: number) => number) =>
      runPipeline({
        redis: ctx.redis,
        prefix,
        sims: sims as Sims,
        count,
        vmidOf,
        timeoutMs: cfg.timeoutMs,
        log: ctx.log,
        botCpuMs: () => activeBot.cpuMs(),
      });
    const bareRun = (count: number) => activeBare.run(count, { timeoutMs: cfg.timeoutMs });
    const flowRun = (count: number) =>
      runBareFlowPipeline({
        flow: activeFlow,
        sims: activeSims,
        redis: ctx.redis,
        prefix: flowPrefix,
        vmids: Array.from({ length: count }, (_, i) => FIRST_VMID + i),
        timeoutMs: cfg.timeoutMs,
      });

    ctx.log('pipeline: warm-up');
    await push(Math.min(WARMUP, cfg.requests));
    await bareRun(Math.min(WARMUP, cfg.requests));
    await flowRun(Math.min(WARMUP, cfg.requests));

    const botRuns: PipelineResult[] = [];
    const bareRuns: BareBullmqResult[] = [];
    const flowRuns: BareFlowPipelineResult[] = [];
    for (let r = 1; r <= ctx.config.pairs; r++) {
      // Alternating which goes first, so a slow moment of the machine does not always fall on the same side.
      if (r % 2 === 1) {
        botRuns.push(await push(cfg.requests));
        bareRuns.push(await bareRun(cfg.requests));
        flowRuns.push(await flowRun(cfg.requests));
      } else {
        flowRuns.push(await flowRun(cfg.requests));
        bareRuns.push(await bareRun(cfg.requests));
        botRuns.push(await push(cfg.requests));
      }
      ctx.log(
        `pipeline: pair ${r}: cloudops ${round(botRuns.at(-1)?.perSecond ?? 0)}/s ${round(botRuns.at(-1)?.cpuMsPerRequest ?? 0, 3)} ms CPU/req, bare ${round(bareRuns.at(-1)?.perSecond ?? 0)}/s ${round(bareRuns.at(-1)?.cpuMsPerJob ?? 0, 3)} ms CPU/job, bare Bolt + BullMQ app ${round(flowRuns.at(-1)?.perSecond ?? 0)}/s ${round(flowRuns.at(-1)?.cpuMsPerJob ?? 0, 3)} ms CPU/job`,
      );
    }
    const cpu = spread(botRuns.map((r) => r.cpuMsPerRequest));
    const bareCpu = spread(bareRuns.map((r) => r.cpuMsPerJob));
    const cpuRatio = spread(
      botRuns.map((r, i) => r.cpuMsPerRequest / (bareRuns[i]?.cpuMsPerJob ?? Number.NaN)),
    );
    const flowCpu = spread(flowRuns.map((r) => r.cpuMsPerJob));
    const flowRate = spread(flowRuns.map((r) => r.perSecond));
    const cpuOverFlow = spread(
      botRuns.map((r, i) => r.cpuMsPerRequest / (flowRuns[i]?.cpuMsPerJob ?? Number.NaN)),
    );
    const rate = spread(botRuns.map((r) => r.perSecond));
    const bareRate = spread(bareRuns.map((r) => r.perSecond));
    const cloud = await sims.cloudSummary();
    const slack = await sims.slackSummary();
    const allSucceeded = botRuns.every((r) => (r.states.succeeded ?? 0) === r.requests);
    const label = `pipeline ${cfg.requests} approved resizes`;
    return {
      rows: [
        {
          scenario: label,
          target: 'cloudops (own process)',
          figures: {
            cpu_ms_per_req: showSpread(cpu, 3),
            per_s: showSpread(rate, 0),
            wait_p99_ms: round(spread(botRuns.map((r) => r.executeWaitP99Ms)).median),
          },
        },
        {
          scenario: label,
          target: 'bare bullmq 2 no-op hops',
          figures: {
            cpu_ms_per_req: showSpread(bareCpu, 3),
            per_s: showSpread(bareRate, 0),
            wait_p99_ms: round(spread(bareRuns.map((r) => r.waitP99Ms)).median),
          },
        },
        {
          scenario: label,
          target: 'bare Bolt + BullMQ app (POST + reply per job)',
          figures: {
            cpu_ms_per_req: showSpread(flowCpu, 3),
            per_s: showSpread(flowRate, 0),
            wait_p99_ms: '',
          },
        },
        { scenario: label, target: 'ratio', figures: { cpu_ms_per_req: showSpread(cpuRatio, 2, '×') } },
        {
          scenario: label,
          target: 'ratio to the bare Bolt + BullMQ app',
          figures: { cpu_ms_per_req: showSpread(cpuOverFlow, 2, '×') },
        },
      ],
      data: {
        concurrency,
        pairs: ctx.config.pairs,
        cpuMsPerRequest: cpu,
        bareCpuMsPerJob: bareCpu,
        cpuRatio,
        bareFlowCpuMsPerJob: flowCpu,
        cpuOverBareFlow: cpuOverFlow,
        bareFlowPerSecond: flowRate,
        perSecond: rate,
        barePerSecond: bareRate,
        cloudops: { runs: botRuns },
        bareBullmq: { runs: bareRuns },
        bareFlow: { runs: flowRuns },
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
          name: `CPU per approved request ≤ ${CPU_TARGET_MS} ms (bot's process)`,
          ok: cpu.median <= CPU_TARGET_MS,
          detail: `${showSpread(cpu, 3, ' ms')}; the bare Bolt + BullMQ app ${showSpread(flowCpu, 3, ' ms')} per job, ratio ${showSpread(cpuOverFlow, 2, '×')}; bare BullMQ two no-op hops ${showSpread(bareCpu, 3, ' ms')}, ratio ${showSpread(cpuRatio, 2, '×')}`,
          figure: cpu,
          baseline: flowCpu,
          ratio: cpuOverFlow,
          limit: `≤ ${CPU_TARGET_MS} ms`,
          unit: ' ms',
          whyMissed:
            "an approved request is two jobs in the bot (the run and its report) where the bare app runs one, and the run takes the VM lock with the request, moves it to sending with its marker and records the success with the VM's facts, the report posts the reply once and updates the message and the App Homes: each Redis round trip and Slack call costs CPU on this machine, and the allocation profile (BENCH_ALLOC_PROFILE) shows no single large item left (docs/performance.md)",
        },
      ],
    };
  } finally {
    await bot?.stop().catch((error: Error) => ctx.log(`pipeline: bot stop: ${error.message}`));
    await bare?.close().catch((error: Error) => ctx.log(`pipeline: bare stop: ${error.message}`));
    await flow?.child.stop().catch(() => undefined);
    await sims?.close();
  }
}
