import { type BenchBot, startBenchBot } from '../lib/bot.ts';
import { BENCH } from '../lib/identity.ts';
import { type PipelineResult, runPipeline } from '../lib/pipeline.ts';
import type { BenchContext, ScenarioResult } from '../lib/scenario.ts';
import { type Sims, startSims } from '../lib/sims.ts';
import { round, showSpread, spread } from '../lib/stats.ts';

/** First VM id of the scaling runs' VMs (one per request); the contention run shares the first few. */
const FIRST_VMID = 70_000;
/** Issue 15: two worker processes at least this times one on approved-request throughput. */
const SCALING_LIMIT = 1.7;

/**
 * Scaling across processes: `ROLE=worker` bots, each alone in its process, against one Redis, with the cloud API
 * answering each resize in `latencyMs` and each process running `jobsPerProcess` jobs at once (so the work waits on
 * I/O: at the bot's default of 16, a few milliseconds of CPU per request saturate 2 shared cores first, and a second
 * process only divides them). One worker on one prefix, two on another; the
 * same approved requests (distinct VMs) go through each set in interleaved pairs. Throughput is first enqueue →
 * last thread reply; CPU is the sum over the set's processes. Then the two workers take requests that share a
 * few VMs, and the cloud simulator counts mutations of one VM that overlapped (from any process): must be 0.
 */
export async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const cfg = ctx.config.workers;
  const n = cfg.requests;
  const sharedVms = Math.max(2, Math.round(cfg.vms / 25));
  const sharedRequests = Math.min(n, sharedVms * 25);
  let sims: Sims | undefined;
  const bots: BenchBot[] = [];
  try {
    sims = await startSims({
      botToken: BENCH.botToken,
      teamId: BENCH.teamId,
      // Fresh VMs for every run (below), and the shared few of the contention run.
      seedVms: { count: (2 * ctx.config.pairs + 2) * n + sharedVms, firstVmid: FIRST_VMID },
    });
    const activeSims = sims;
    const worker = async (prefix: string) => {
      const bot = await startBenchBot(activeSims, {
        redisUrl: ctx.redisUrl,
        prefix,
        role: 'worker',
        concurrency: { execute: cfg.jobsPerProcess, notify: cfg.jobsPerProcess },
        logLevel: ctx.config.logLevel,
        logFile: ctx.logFile,
      });
      bots.push(bot);
      return bot;
    };
    const oneSet = { prefix: ctx.newPrefix('workers-1'), bots: [] as BenchBot[] };
    const twoSet = { prefix: ctx.newPrefix('workers-2'), bots: [] as BenchBot[] };
    oneSet.bots.push(await worker(oneSet.prefix));
    twoSet.bots.push(await worker(twoSet.prefix), await worker(twoSet.prefix));
    const overlapsBefore = (await sims.cloudSummary()).overlaps;

    const push = async (set: typeof oneSet, count: number, vmidOf: (i: number) => number) => {
      await activeSims.cloudLatency(cfg.latencyMs, count);
      return runPipeline({
        redis: ctx.redis,
        prefix: set.prefix,
        sims: activeSims,
        count,
        vmidOf,
        timeoutMs: cfg.timeoutMs,
        log: ctx.log,
        botCpuMs: async () => (await Promise.all(set.bots.map((b) => b.cpuMs()))).reduce((a, b) => a + b, 0),
      });
    };
    // Each run resizes VMs no run changed before: a worker checks a request against what it knows of the VM before
    // sending it, and a request made before an earlier run changed the VM no longer stands.
    let nextVmid = FIRST_VMID;
    const fresh = (count: number) => {
      const first = nextVmid;
      nextVmid += count;
      return (i: number) => first + i;
    };

    ctx.log('workers: warm-up');
    await push(oneSet, Math.min(n, 300), fresh(Math.min(n, 300)));
    await push(twoSet, Math.min(n, 300), fresh(Math.min(n, 300)));

    const one: PipelineResult[] = [];
    const two: PipelineResult[] = [];
    for (let r = 1; r <= ctx.config.pairs; r++) {
      if (r % 2 === 1) {
        one.push(await push(oneSet, n, fresh(n)));
        two.push(await push(twoSet, n, fresh(n)));
      } else {
        two.push(await push(twoSet, n, fresh(n)));
        one.push(await push(oneSet, n, fresh(n)));
      }
      ctx.log(
        `workers: pair ${r}: 1 worker ${round(one.at(-1)?.perSecond ?? 0)}/s, 2 workers ${round(two.at(-1)?.perSecond ?? 0)}/s`,
      );
    }
    ctx.log(`workers: ${sharedRequests} requests over ${sharedVms} shared VMs through the two workers`);
    const sharedFirst = fresh(sharedVms)(0);
    const shared = await push(twoSet, sharedRequests, (i) => sharedFirst + (i % sharedVms));
    const cloud = await sims.cloudSummary();
    const overlaps = cloud.overlaps - overlapsBefore;

    const rateOne = spread(one.map((r) => r.perSecond));
    const rateTwo = spread(two.map((r) => r.perSecond));
    const scaling = spread(two.map((r, i) => r.perSecond / (one[i]?.perSecond ?? Number.NaN)));
    // Requests per CPU-second of the set's processes: cpuMsPerRequest is per request already.
    const perCpuOne = spread(one.map((r) => 1000 / r.cpuMsPerRequest));
    const perCpuTwo = spread(two.map((r) => 1000 / r.cpuMsPerRequest));
    const label = `workers ${n} approved resizes, API ${cfg.latencyMs} ms, ${cfg.jobsPerProcess} jobs at once per process`;
    const succeeded = [...one, ...two].every((r) => (r.states.succeeded ?? 0) === r.requests);
    // On a shared VM the first request changes it; the later ones, made before that, are refused unsent by the
    // worker's re-check (the VM is no longer what they were made against). Each still takes the VM's lock.
    const sharedOk = shared.states.succeeded ?? 0;
    const sharedEnded = sharedOk + (shared.states.refused ?? 0) === shared.requests && sharedOk >= sharedVms;
    return {
      rows: [
        {
          scenario: label,
          target: '1 ROLE=worker process',
          figures: {
            per_s: showSpread(rateOne, 0),
            per_cpu_s: showSpread(perCpuOne, 0),
            cpu_ms_per_req: round(spread(one.map((r) => r.cpuMsPerRequest)).median, 3),
          },
        },
        {
          scenario: label,
          target: '2 ROLE=worker processes',
          figures: {
            per_s: showSpread(rateTwo, 0),
            per_cpu_s: showSpread(perCpuTwo, 0),
            cpu_ms_per_req: round(spread(two.map((r) => r.cpuMsPerRequest)).median, 3),
          },
        },
        { scenario: label, target: '2 / 1', figures: { per_s: showSpread(scaling, 2, '×') } },
        {
          scenario: `workers ${sharedRequests} over ${sharedVms} shared VMs`,
          target: '2 ROLE=worker processes',
          figures: { per_s: round(shared.perSecond), overlaps },
        },
      ],
      data: {
        requests: n,
        latencyMs: cfg.latencyMs,
        jobsPerProcess: cfg.jobsPerProcess,
        pairs: ctx.config.pairs,
        perSecondOne: rateOne,
        perSecondTwo: rateTwo,
        scaling,
        perCpuSecondOne: perCpuOne,
        perCpuSecondTwo: perCpuTwo,
        one,
        two,
        shared: { requests: sharedRequests, vms: sharedVms, run: shared },
        overlaps,
        cloud,
      },
      checks: [
        {
          name: 'workers: every request of the scaling runs succeeded',
          ok: succeeded,
          detail: [...one, ...two].map((r) => JSON.stringify(r.states)).join(' '),
        },
        {
          name: 'workers: on the shared VMs each request ended, each VM changed once, the rest refused unsent',
          ok: sharedEnded,
          detail: JSON.stringify(shared.states),
        },
        {
          name: 'workers: no overlapping mutation of a VM across processes',
          ok: overlaps === 0,
          detail: `${overlaps} overlaps (${sharedRequests} requests over ${sharedVms} VMs through two processes, and every scaling run)`,
        },
      ],
      targets: [
        {
          name: `two ROLE=worker processes ≥ ${SCALING_LIMIT}× one on throughput (API ${cfg.latencyMs} ms)`,
          ok: scaling.median >= SCALING_LIMIT,
          detail: `${showSpread(rateTwo, 0, '/s')} vs ${showSpread(rateOne, 0, '/s')}: ${showSpread(scaling, 2, '×')}; per CPU-second ${showSpread(perCpuTwo, 0)} vs ${showSpread(perCpuOne, 0)}`,
          figure: rateTwo,
          baseline: rateOne,
          ratio: scaling,
          limit: `≥ ${SCALING_LIMIT}×`,
          unit: '/s',
        },
        {
          name: 'workers: 0 overlaps across processes',
          ok: overlaps === 0,
          detail: `${overlaps} overlaps`,
          figure: spread([overlaps]),
          limit: '0',
        },
        {
          name: 'workers: approved requests per CPU-second (reported)',
          ok: true,
          detail: `1 worker ${showSpread(perCpuOne, 0)}, 2 workers ${showSpread(perCpuTwo, 0)}`,
          figure: perCpuTwo,
          baseline: perCpuOne,
          limit: 'report',
          unit: '/CPU-s',
        },
      ],
    };
  } finally {
    for (const bot of bots)
      await bot.stop().catch((error: Error) => ctx.log(`workers: stop: ${error.message}`));
    await sims?.close();
  }
}
