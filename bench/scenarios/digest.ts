import { DigestScheduler } from '../../src/jobs/digest-scheduler.ts';
import { type BenchBot, startBenchBot } from '../lib/bot.ts';
import { BENCH } from '../lib/identity.ts';
import { forEachParallel, range } from '../lib/parallel.ts';
import type { BenchContext, Check, ScenarioResult } from '../lib/scenario.ts';
import { type Sims, startSims } from '../lib/sims.ts';
import { median, round } from '../lib/stats.ts';

/** How often the bench looks at the stand-in while digests go out. */
const POLL_MS = 250;
/** After the last expected message, how long to keep looking for a duplicate. */
const SETTLE_MS = 2_000;
/** Subscriptions written at once. */
const SUBSCRIBE_PARALLEL = 20;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const channelOf = (run: number, i: number) => `C0R${run}D${String(i).padStart(4, '0')}`;

/** A daily cron pattern (with seconds, UTC) that fires at `at`'s second. */
function patternAt(at: Date): string {
  return `${at.getUTCSeconds()} ${at.getUTCMinutes()} ${at.getUTCHours()} * * *`;
}

interface RunFigures {
  channels: number;
  /** The due time → the last digest message on the stand-in. */
  elapsedMs: number;
  floorMs: number;
  lost: number;
  duplicated: number;
  rateLimited: number;
}

/**
 * Digest fan-out: many channels subscribed through the pricing scheduler, all due at the same second, with the Slack
 * stand-in allowing about one message per second per channel (429 + Retry-After beyond): every channel gets its
 * digest exactly once, and the time is compared with the floor the limit sets.
 */
export async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const cfg = ctx.config.digest;
  let sims: Sims | undefined;
  let bot: BenchBot | undefined;
  let scheduler: DigestScheduler | undefined;
  try {
    // Extra zones make each digest several messages, so the per-channel limit (and its 429s) comes into play.
    sims = await startSims({ botToken: BENCH.botToken, teamId: BENCH.teamId, extraClusters: cfg.clusters });
    await sims.limitPerChannel(cfg.perChannelPerSecond);
    const prefix = ctx.newPrefix('digest');
    bot = await startBenchBot(sims, {
      redisUrl: ctx.redisUrl,
      prefix,
      role: 'all',
      logLevel: ctx.config.logLevel,
      logFile: ctx.logFile,
    });
    scheduler = new DigestScheduler({ connection: ctx.redis, prefix, now: () => new Date() });
    const activeSims = sims;
    const activeScheduler = scheduler;

    // Warm-up and probe: how many messages one digest is, today's clusters being what they are.
    const probe = 'C0PROBE';
    await activeScheduler.sendNow(probe, BENCH.requester);
    const parts = await waitFor(
      async () => (await activeSims.slackSummary('C0PROBE')).topLevelPerChannel[probe],
      cfg.timeoutMs,
      'the probe digest',
    );
    await sleep(SETTLE_MS);
    const partsPerDigest = (await activeSims.slackSummary('C0PROBE')).topLevelPerChannel[probe] ?? parts;
    ctx.log(`digest: one digest is ${partsPerDigest} message(s)`);

    const runs: RunFigures[] = [];
    for (let r = 1; r <= ctx.config.runs; r++) {
      const channels = Array.from(range(cfg.channels), (i) => channelOf(r, i));
      // Far enough ahead that every subscription is written before the due second.
      const leadMs = 3000 + cfg.channels * 10;
      const due = new Date(Math.ceil((Date.now() + leadMs) / 1000) * 1000);
      const schedule = {
        pattern: patternAt(due),
        tz: 'UTC',
        label: `bench daily at ${due.toISOString().slice(11, 19)} UTC`,
      };
      await forEachParallel(channels, SUBSCRIBE_PARALLEL, async (channel) => {
        await activeScheduler.subscribe(channel, schedule, BENCH.requester);
      });
      if (Date.now() > due.getTime() - 200)
        throw new Error(`digest: ${cfg.channels} subscriptions took longer than the ${leadMs} ms lead`);
      const limitRejectsBefore = (await activeSims.slackSummary()).rateLimited;
      ctx.log(`digest: run ${r}: ${cfg.channels} channels due at ${due.toISOString()}`);

      const prefixOfRun = `C0R${r}D`;
      const complete = async () => {
        const summary = await activeSims.slackSummary(prefixOfRun);
        const full = channels.filter((c) => (summary.topLevelPerChannel[c] ?? 0) >= partsPerDigest).length;
        return full === channels.length ? summary : undefined;
      };
      await waitFor(
        complete,
        Math.max(0, due.getTime() - Date.now()) + cfg.timeoutMs,
        `digests of run ${r}`,
      ).catch((error: Error) => ctx.log(error.message));
      await sleep(SETTLE_MS);
      const summary = await activeSims.slackSummary(prefixOfRun);
      const counts = channels.map((c) => summary.topLevelPerChannel[c] ?? 0);
      const figures: RunFigures = {
        channels: channels.length,
        elapsedMs: (summary.lastPostAt ?? Number.NaN) - due.getTime(),
        floorMs: ((partsPerDigest - 1) * 1000) / cfg.perChannelPerSecond,
        lost: counts.filter((n) => n < partsPerDigest).length,
        duplicated: counts.filter((n) => n > partsPerDigest).length,
        rateLimited: summary.rateLimited - limitRejectsBefore,
      };
      runs.push(figures);
      ctx.log(`digest: run ${r}: ${JSON.stringify(figures)}`);
      await forEachParallel(channels, SUBSCRIBE_PARALLEL, async (channel) => {
        await activeScheduler.unsubscribe(channel);
      });
    }

    const elapsed = median(runs.map((r) => r.elapsedMs));
    const floorMs = runs[0]?.floorMs ?? 0;
    const slack = await sims.slackSummary();
    const checks: Check[] = runs.flatMap((r, i) => [
      {
        name: `digest run ${i + 1}: every channel got its digest`,
        ok: r.lost === 0,
        detail: `${r.channels - r.lost} of ${r.channels} channels complete`,
      },
      {
        name: `digest run ${i + 1}: no digest twice`,
        ok: r.duplicated === 0,
        detail: `${r.duplicated} channels with extra messages`,
      },
    ]);
    checks.push({
      name: 'digest: the Slack stand-in saw no invalid call',
      ok: slack.problems === 0,
      detail: slack.problems === 0 ? 'none' : slack.firstProblems.join('; '),
    });
    return {
      rows: [
        {
          scenario: `digest ${cfg.channels} channels same second`,
          target: 'cloudops',
          figures: {
            seconds: round(elapsed / 1000),
            floor_s: round(floorMs / 1000),
            parts: partsPerDigest,
            lost: Math.max(...runs.map((r) => r.lost)),
            duplicated: Math.max(...runs.map((r) => r.duplicated)),
            '429s': median(runs.map((r) => r.rateLimited)),
          },
        },
      ],
      data: {
        perChannelPerSecond: cfg.perChannelPerSecond,
        partsPerDigest,
        runs,
        medianElapsedMs: elapsed,
        floorMs,
        slack,
      },
      checks,
      targets: [
        {
          name: 'digest: all delivered within the floor + 10 s',
          ok: elapsed <= floorMs + 10_000,
          detail: `${round(elapsed / 1000)} s after the due second; floor ${round(floorMs / 1000)} s (${partsPerDigest} message(s) at ${cfg.perChannelPerSecond}/s per channel)`,
        },
      ],
    };
  } finally {
    await scheduler?.close().catch(() => undefined);
    await bot?.stop().catch((error: Error) => ctx.log(`digest: bot stop: ${error.message}`));
    await sims?.close();
  }
}

/** Polls `probe` until it returns a value; rejects after `timeoutMs`. */
async function waitFor<T>(probe: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`digest: ${what} did not arrive within ${timeoutMs} ms`);
    await sleep(POLL_MS);
  }
}
