import { createServer, type Server } from 'node:http';
import { RequestStore } from '../../src/requests/store/store.ts';
import { timeApproveClicks } from '../lib/approve-clicks.ts';
import { type BenchBot, startBenchBot } from '../lib/bot.ts';
import { BENCH } from '../lib/identity.ts';
import { type LoadGenerator, startLoadGenerator } from '../lib/load-generator.ts';
import { postRequestMessages } from '../lib/pipeline.ts';
import { benchResize, createMany } from '../lib/requests.ts';
import type { BenchContext, ScenarioResult } from '../lib/scenario.ts';
import { type Sims, startSims } from '../lib/sims.ts';
import { percentile, round, type Spread, showSpread, spread } from '../lib/stats.ts';

/** First VM id of this scenario's VMs: one per click, the two bots on separate halves. */
const FIRST_VMID = 70_000;

/** One run of clicks on one bot: what an approved request cost its process, and how long a click took to the API. */
interface TracingRun {
  clicks: number;
  /** CPU of the bot's process from the first click to the last reply, per approved request. */
  cpuMsPerRequest: number;
  toApiP50: number;
  toApiP99: number;
  /** Clicks whose API call and result reply both arrived. */
  complete: number;
}

/** A stand-in collector: answers every OTLP/HTTP export at once, and counts what it got. */
async function startSink(): Promise<{
  url: string;
  exports: () => number;
  bytes: () => number;
  server: Server;
}> {
  let exports = 0;
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
    });
    req.on('end', () => {
      exports += 1;
      res.writeHead(200, { 'content-type': req.headers['content-type'] ?? 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return { url: `http://127.0.0.1:${port}`, exports: () => exports, bytes: () => bytes, server };
}

/**
 * Tracing off against on: two bots side by side in processes of their own (ROLE=all), one without `OTEL_*`, one
 * exporting to a stand-in collector with the standard defaults (OTLP/HTTP protobuf, 5 s batches). Signed Approve
 * clicks at a steady rate on pending requests of distinct VMs, runs interleaved (the order alternating by pair):
 * CPU of the bot's process per approved request (click → API call → thread reply) and click → API call p50.
 */
export async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const cfg = ctx.config.tracing;
  const n = cfg.clicks;
  let sims: Sims | undefined;
  const bots: BenchBot[] = [];
  let load: LoadGenerator | undefined;
  let sink: Awaited<ReturnType<typeof startSink>> | undefined;
  try {
    // Each run uses its own VMs (a VM changed within 24 h may not grow again); the bots take turns over them.
    const runsPerBot = ctx.config.pairs + 1;
    sims = await startSims({
      botToken: BENCH.botToken,
      teamId: BENCH.teamId,
      seedVms: { count: n * runsPerBot * 2, firstVmid: FIRST_VMID },
    });
    const activeSims = sims;
    sink = await startSink();
    const variants = [
      { name: 'off', env: {} },
      { name: 'on', env: { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_SERVICE_NAME: 'cloudops-bench' } },
    ] as const;
    const started: { name: string; bot: BenchBot; store: RequestStore; nextVm: number }[] = [];
    for (const [i, variant] of variants.entries()) {
      const prefix = ctx.newPrefix(`tracing-${variant.name}`);
      const bot = await startBenchBot(sims, {
        redisUrl: ctx.redisUrl,
        prefix,
        role: 'all',
        logLevel: ctx.config.logLevel,
        logFile: ctx.logFile,
        env: variant.env,
      });
      bots.push(bot);
      started.push({
        name: variant.name,
        bot,
        store: new RequestStore(ctx.redis, { prefix }),
        nextVm: FIRST_VMID + i * n * runsPerBot,
      });
    }
    load = await startLoadGenerator();
    const activeLoad = load;
    const approver = {
      teamId: BENCH.teamId,
      channelId: BENCH.channel,
      userId: BENCH.approver,
      responseUrl: await sims.responseUrl(BENCH.channel, BENCH.approver),
    };

    const clickRun = async (side: (typeof started)[number], clicks: number): Promise<TracingRun> => {
      const first = side.nextVm;
      side.nextVm += clicks;
      const created = await createMany(side.store, clicks, (i) =>
        benchResize(activeSims.projectUuid, first + i),
      );
      const pending = await postRequestMessages(side.store, created, activeSims, { approve: false });
      const cpuBefore = await side.bot.cpuMs();
      const { toApi, toReply } = await timeApproveClicks({
        what: 'tracing',
        sims: activeSims,
        load: activeLoad,
        url: side.bot.eventsUrl,
        approver,
        pending,
        perSecond: cfg.perSecond,
        timeoutMs: cfg.timeoutMs,
      });
      const complete = toReply.length;
      const cpuMs = (await side.bot.cpuMs()) - cpuBefore;
      const sorted = toApi.toSorted((a, b) => a - b);
      return {
        clicks,
        cpuMsPerRequest: cpuMs / clicks,
        toApiP50: percentile(sorted, 50),
        toApiP99: percentile(sorted, 99),
        complete,
      };
    };

    ctx.log('tracing: warm-up');
    for (const side of started) await clickRun(side, n);
    const runs: Record<'off' | 'on', TracingRun[]> = { off: [], on: [] };
    for (let r = 1; r <= ctx.config.pairs; r++) {
      // Alternating which goes first, so a slow moment of the machine does not always fall on the same side.
      const order = r % 2 === 1 ? started : started.toReversed();
      for (const side of order) runs[side.name as 'off' | 'on'].push(await clickRun(side, n));
      const off = runs.off.at(-1);
      const on = runs.on.at(-1);
      ctx.log(
        `tracing: pair ${r}: off ${round(off?.cpuMsPerRequest ?? 0, 3)} ms CPU/req, click→API p50 ${round(off?.toApiP50 ?? 0, 2)} ms; on ${round(on?.cpuMsPerRequest ?? 0, 3)} ms, ${round(on?.toApiP50 ?? 0, 2)} ms`,
      );
    }
    // Spans go out in batches every 5 s (the default): a short run may end before the first one.
    const exportBy = performance.now() + 8_000;
    while (sink.exports() === 0 && performance.now() < exportBy) await new Promise((r) => setTimeout(r, 100));
    const s = (side: 'off' | 'on', pick: (r: TracingRun) => number): Spread => spread(runs[side].map(pick));
    const figures = {
      offCpu: s('off', (r) => r.cpuMsPerRequest),
      onCpu: s('on', (r) => r.cpuMsPerRequest),
      offP50: s('off', (r) => r.toApiP50),
      onP50: s('on', (r) => r.toApiP50),
      offP99: s('off', (r) => r.toApiP99),
      onP99: s('on', (r) => r.toApiP99),
      cpuRatio: spread(
        runs.on.map((r, i) => r.cpuMsPerRequest / (runs.off[i]?.cpuMsPerRequest ?? Number.NaN)),
      ),
      p50Ratio: spread(runs.on.map((r, i) => r.toApiP50 / (runs.off[i]?.toApiP50 ?? Number.NaN))),
    };
    const label = `tracing ${n} clicks at ${cfg.perSecond}/s`;
    const row = (target: string, cpu: Spread, p50: Spread, p99: Spread) => ({
      scenario: label,
      target,
      figures: {
        cpu_ms_per_req: showSpread(cpu, 3),
        click_to_api_p50_ms: showSpread(p50, 2),
        p99_ms: showSpread(p99, 1),
      },
    });
    const complete = [...runs.off, ...runs.on].every((r) => r.complete === n);
    return {
      rows: [
        row('tracing off (no OTEL_*)', figures.offCpu, figures.offP50, figures.offP99),
        row('tracing on (OTLP to a collector)', figures.onCpu, figures.onP50, figures.onP99),
        {
          scenario: label,
          target: 'on / off',
          figures: {
            cpu_ms_per_req: showSpread(figures.cpuRatio, 2, '×'),
            click_to_api_p50_ms: showSpread(figures.p50Ratio, 2, '×'),
          },
        },
      ],
      data: {
        clicks: n,
        perSecond: cfg.perSecond,
        pairs: ctx.config.pairs,
        ...figures,
        exports: sink.exports(),
        exportedBytes: sink.bytes(),
        runs,
      },
      checks: [
        {
          name: 'tracing: every click reached the API and got its result reply, tracing off and on',
          ok: complete,
          detail: Object.entries(runs)
            .map(([side, list]) => `${side}: ${list.map((r) => `${r.complete}/${n}`).join(' ')}`)
            .join('; '),
        },
        {
          name: 'tracing: the bot with OTEL_* exported to the collector',
          ok: sink.exports() > 0,
          detail: `${sink.exports()} exports, ${sink.bytes()} bytes`,
        },
      ],
      targets: [
        {
          name: 'tracing on: CPU per approved request (reported; off is the bot as before)',
          ok: true,
          detail: `off ${showSpread(figures.offCpu, 3, ' ms')}, on ${showSpread(figures.onCpu, 3, ' ms')}: ${showSpread(figures.cpuRatio, 2, '×')}`,
          figure: figures.onCpu,
          baseline: figures.offCpu,
          ratio: figures.cpuRatio,
          limit: 'reported',
          unit: ' ms',
        },
        {
          name: 'tracing on: click → API call p50 (reported)',
          ok: true,
          detail: `off ${showSpread(figures.offP50, 2, ' ms')}, on ${showSpread(figures.onP50, 2, ' ms')}: ${showSpread(figures.p50Ratio, 2, '×')}`,
          figure: figures.onP50,
          baseline: figures.offP50,
          ratio: figures.p50Ratio,
          limit: 'reported',
          unit: ' ms',
        },
      ],
    };
  } finally {
    for (const bot of bots)
      await bot.stop().catch((error: Error) => ctx.log(`tracing: bot stop: ${error.message}`));
    await load?.close();
    await sims?.close();
    if (sink) await new Promise<void>((resolve) => sink?.server.close(() => resolve()));
  }
}
