import { requestKeys } from '../../src/requests/store/keys.ts';
import { type BenchBot, startBenchBot } from '../lib/bot.ts';
import { BENCH } from '../lib/identity.ts';
import { runPipeline } from '../lib/pipeline.ts';
import { type Footprint, footprint } from '../lib/redis-bytes.ts';
import type { BenchContext, ScenarioResult } from '../lib/scenario.ts';
import { type Sims, startSims } from '../lib/sims.ts';
import { round, spread } from '../lib/stats.ts';

/** First VM id of the retention scenario's VMs. */
const FIRST_VMID = 60_000;
const DAY_MS = 86_400_000;
/** Issue 15: at most 1.5 KB per finished request while retained. */
const HELD_LIMIT_B = 1500;
/** Kinds of keys that are per queue or per VM, bounded whatever the history. */
const BOUNDED = ['events', 'id', 'meta', 'marker', 'stalled-check', 'limiter', 'vm'];

/** Bytes that grew between two footprints, per kind. */
function growth(from: Footprint, to: Footprint): Record<string, number> {
  const out: Record<string, number> = {};
  for (const kind of new Set([...Object.keys(from.byKind), ...Object.keys(to.byKind)])) {
    const d = (to.byKind[kind] ?? 0) - (from.byKind[kind] ?? 0);
    if (d !== 0) out[kind] = d;
  }
  return out;
}

/**
 * Redis bytes per finished request (docs/operations.md#retention, issue 16's retention): the bot alone in its process (ROLE=all,
 * retention_days 30, a clock the bench moves) runs approved requests to success; MEMORY USAGE of every key under its
 * prefix, less what the idle bot held before, while they are retained; then the clock moves past retention_days,
 * the bot's own sweep runs, one more round takes finished jobs of any age (what goes a day later), and the bytes are
 * counted again. Keys with a TTL (send markers, reply records: they expire by real time) are counted apart.
 */
export async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const cfg = ctx.config.retention;
  const n = cfg.requests;
  let sims: Sims | undefined;
  let bot: BenchBot | undefined;
  try {
    sims = await startSims({
      botToken: BENCH.botToken,
      teamId: BENCH.teamId,
      seedVms: { count: n, firstVmid: FIRST_VMID },
    });
    // As long as the default `cloudops`: a request's key name is part of what it holds.
    const prefix = ctx.productLengthPrefix();
    bot = await startBenchBot(sims, {
      redisUrl: ctx.redisUrl,
      prefix,
      role: 'all',
      logLevel: ctx.config.logLevel,
      logFile: ctx.logFile,
      policyPrefix: `retention_days: ${cfg.retentionDays}\n`,
      fastRetention: true,
    });
    const idle = await footprint(ctx.redis, prefix);
    const result = await runPipeline({
      redis: ctx.redis,
      prefix,
      sims,
      count: n,
      vmidOf: (i) => FIRST_VMID + i,
      timeoutMs: ctx.config.pipeline.timeoutMs,
      log: ctx.log,
    });
    // The last reports finish after their reply is posted.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const held = await footprint(ctx.redis, prefix);

    // A day later the finished jobs go (the sweep's job age); the requests and their audit stay retention_days.
    const sweptJobs = await bot.sweepFinished();
    const retained = await footprint(ctx.redis, prefix);

    await bot.advanceClock((cfg.retentionDays + 1) * DAY_MS);
    const keys = requestKeys(prefix);
    const deadline = performance.now() + 60_000;
    while ((await ctx.redis.zcard(keys.retention)) > 0 || (await ctx.redis.zcard(keys.created)) > 0) {
      if (performance.now() > deadline) throw new Error('retention did not remove the requests within 60 s');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const swept = await bot.sweepFinished();
    const after = await footprint(ctx.redis, prefix);

    // Per request: what grew over the idle bot, less what is per queue or per VM and bounded whatever the history
    // (BullMQ's event streams, capped at about 1000 entries; job id counters; one VM-facts record per VM).
    const perRequest = (from: Footprint, to: Footprint) =>
      Object.entries(growth(from, to))
        .filter(([kind]) => !BOUNDED.some((suffix) => kind === suffix || kind.endsWith(` ${suffix}`)))
        .reduce((sum, [, b]) => sum + b, 0) / n;
    const heldPerRequest = perRequest(idle, held);
    const retainedPerRequest = perRequest(idle, retained);
    const ttlPerRequest = (held.ttlBytes - idle.ttlBytes) / n;
    const afterGrowth = growth(idle, after);
    // An audit stream trimmed to nothing keeps its own few hundred bytes (one key, whatever the history).
    const auditEntriesAfter = await ctx.redis.xlen(keys.audit);
    const keptPerRequest =
      perRequest(idle, after) - (auditEntriesAfter === 0 ? Math.max(0, afterGrowth.audit ?? 0) / n : 0);
    const label = `Redis bytes, ${n} finished requests`;
    const one = (v: number) => spread([v]);
    return {
      rows: [
        {
          scenario: label,
          target: 'just finished (jobs kept 1 day)',
          figures: {
            bytes_per_request: round(heldPerRequest),
            ttl_bytes_per_request: round(ttlPerRequest),
            keys: held.keys - idle.keys,
          },
        },
        {
          scenario: label,
          target: `retained (${cfg.retentionDays} days)`,
          figures: {
            bytes_per_request: round(retainedPerRequest),
            ttl_bytes_per_request: round((retained.ttlBytes - idle.ttlBytes) / n),
            keys: retained.keys - idle.keys,
          },
        },
        {
          scenario: label,
          target: `after ${cfg.retentionDays} days`,
          figures: {
            bytes_per_request: round(keptPerRequest, 2),
            ttl_bytes_per_request: round((after.ttlBytes - idle.ttlBytes) / n),
            keys: after.keys - idle.keys,
          },
        },
      ],
      data: {
        requests: n,
        retentionDays: cfg.retentionDays,
        states: result.states,
        idle,
        held,
        retained,
        after,
        heldGrowthByKind: growth(idle, held),
        retainedGrowthByKind: growth(idle, retained),
        sweptJobs,
        afterGrowthByKind: afterGrowth,
        sweptFinished: swept,
        auditEntriesAfter,
        heldPerRequest,
        retainedPerRequest,
        ttlPerRequest,
        keptPerRequest,
      },
      checks: [
        {
          name: 'retention: every request succeeded',
          ok: (result.states.succeeded ?? 0) === n,
          detail: JSON.stringify(result.states),
        },
      ],
      targets: [
        {
          name: 'Redis ≤ 1.5 KB per finished request while retained',
          ok: retainedPerRequest <= HELD_LIMIT_B,
          detail: `${round(retainedPerRequest)} B per request kept ${cfg.retentionDays} days (by kind: ${JSON.stringify(growth(idle, retained))}); ${round(heldPerRequest)} B for the first day, finished jobs included (${JSON.stringify(growth(idle, held))}); ${round(ttlPerRequest)} B more in keys with a TTL (3 days)`,
          figure: one(retainedPerRequest),
          limit: `≤ ${HELD_LIMIT_B} B`,
          unit: ' B',
        },
        {
          name: 'Redis: nothing kept past retention',
          ok: keptPerRequest < 1,
          detail: `${round(keptPerRequest, 2)} B per request left (growth by kind over the idle bot: ${JSON.stringify(afterGrowth)}); audit entries left ${auditEntriesAfter}; keys with a TTL go by real time`,
          figure: one(keptPerRequest),
          limit: '0 B',
          unit: ' B',
        },
      ],
    };
  } finally {
    await bot?.stop().catch((error: Error) => ctx.log(`retention: bot stop: ${error.message}`));
    await sims?.close();
  }
}
