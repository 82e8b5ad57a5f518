import { RequestStore } from '../../src/requests/store/store.ts';
import { ACTIONS } from '../../src/slack/blocks/request-message.ts';
import { type BareBolt, startBareBolt } from '../lib/bare-bolt.ts';
import { type BenchBot, startBenchBot } from '../lib/bot.ts';
import { BENCH } from '../lib/identity.ts';
import { type LoadGenerator, startLoadGenerator } from '../lib/load-generator.ts';
import type { LoadRequestKind, LoadResult, LoadShape } from '../lib/load-protocol.ts';
import { benchResize, createMany } from '../lib/requests.ts';
import type { BenchContext, Check, ScenarioResult } from '../lib/scenario.ts';
import { type Sims, startSims } from '../lib/sims.ts';
import type { SlackIdentity } from '../lib/slack-request.ts';
import { type LatencySummary, medianOf, round, summarizeLatencies } from '../lib/stats.ts';
import type { Row } from '../lib/table.ts';

/** One request never waits longer than this in the client (it then counts as an error). */
const REQUEST_TIMEOUT_MS = 10_000;
/** How long the bench waits, after the last load run, for modals still being opened. */
const MODAL_WAIT_MS = 15_000;
/** The VM the resize commands name. */
const COMMAND_VMID = 101;

type Kind = 'command' | 'approve';
type Target = 'cloudops' | 'bare-bolt';

const shapeName = (shape: LoadShape) =>
  shape.type === 'rate' ? `${shape.perSecond}/s` : `burst ${shape.count}`;
const shapeCount = (shape: LoadShape) =>
  shape.type === 'rate' ? Math.round((shape.perSecond * shape.durationMs) / 1000) : shape.count;

/**
 * Ack latency: signed `/cloud resize` commands (the path that opens a modal) and Approve clicks on pending requests,
 * at fixed rates and in a burst, against the bot and against a bare Bolt app that only acks.
 */
export async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const cfg = ctx.config.ack;
  const shapes: LoadShape[] = [
    ...cfg.rates.map((perSecond): LoadShape => ({ type: 'rate', perSecond, durationMs: cfg.durationMs })),
    { type: 'burst', count: cfg.burst },
  ];
  const warmup: LoadShape = { type: 'rate', perSecond: 100, durationMs: cfg.warmupMs };
  const clicksNeeded = shapeCount(warmup) + ctx.config.runs * shapes.reduce((n, s) => n + shapeCount(s), 0);

  let load: LoadGenerator | undefined;
  let bare: BareBolt | undefined;
  let sims: Sims | undefined;
  let bot: BenchBot | undefined;
  try {
    load = await startLoadGenerator();
    bare = await startBareBolt(BENCH.signingSecret, ACTIONS.approve);
    sims = await startSims({ botToken: BENCH.botToken, teamId: BENCH.teamId });
    const prefix = ctx.newPrefix('ack');
    bot = await startBenchBot(sims, {
      redisUrl: ctx.redisUrl,
      prefix,
      role: cfg.role,
      logLevel: ctx.config.logLevel,
      logFile: ctx.logFile,
    });

    ctx.log(`ack: creating ${clicksNeeded} pending requests to approve`);
    const store = new RequestStore(ctx.redis, { prefix });
    const projectUuid = sims.projectUuid;
    const pending = await createMany(store, clicksNeeded, (i) =>
      benchResize(projectUuid, COMMAND_VMID + (i % 2)),
    );
    let clickCursor = 0;
    const takeClicks = (n: number) => {
      const ids = pending.slice(clickCursor, clickCursor + n).map((r) => r.id);
      clickCursor += n;
      return ids;
    };

    const requester: SlackIdentity = {
      teamId: BENCH.teamId,
      channelId: BENCH.channel,
      userId: BENCH.requester,
      responseUrl: await sims.responseUrl(BENCH.channel, BENCH.requester),
    };
    const approver: SlackIdentity = { ...requester, userId: BENCH.approver };
    const urls: Record<Target, string> = { cloudops: bot.eventsUrl, 'bare-bolt': bare.url };
    const activeLoad = load;
    const activeSims = sims;

    let commandsAcked = 0;
    const send = async (target: Target, kind: Kind, shape: LoadShape): Promise<LoadResult> => {
      const n = shapeCount(shape);
      // Bare Bolt acks any click, so it gets stand-in ids; the bot gets fresh pending requests, one per click.
      const requestKind: LoadRequestKind =
        kind === 'command'
          ? { type: 'command', text: `resize ${BENCH.project} ${COMMAND_VMID} cores=4` }
          : {
              type: 'action',
              actionId: ACTIONS.approve,
              values: target === 'cloudops' ? takeClicks(n) : Array.from({ length: n }, (_, i) => `BARE${i}`),
            };
      const who = kind === 'command' ? requester : approver;
      const result = await activeLoad.run({
        url: urls[target],
        secret: BENCH.signingSecret,
        who: { ...who, responseUrl: await activeSims.responseUrl(BENCH.channel, who.userId) },
        kind: requestKind,
        shape,
        connections: cfg.connections,
        timeoutMs: REQUEST_TIMEOUT_MS,
      });
      if (target === 'cloudops' && kind === 'command') commandsAcked += result.latencies.length;
      if (result.errors > 0) {
        ctx.log(
          `ack: ${target} ${kind} ${shapeName(shape)}: ${result.errors} errors (first: ${result.firstError})`,
        );
      }
      return result;
    };

    ctx.log('ack: warm-up');
    for (const target of ['cloudops', 'bare-bolt'] as const) {
      for (const kind of ['command', 'approve'] as const) await send(target, kind, warmup);
    }

    type Key = `${Kind}|${string}|${Target}`;
    const runs = new Map<Key, (LatencySummary & { maxSendLagMs: number })[]>();
    for (let r = 1; r <= ctx.config.runs; r++) {
      for (const shape of shapes) {
        for (const kind of ['command', 'approve'] as const) {
          // Interleaved, so slow moments of a busy machine fall on both targets alike.
          for (const target of ['cloudops', 'bare-bolt'] as const) {
            const result = await send(target, kind, shape);
            const key: Key = `${kind}|${shapeName(shape)}|${target}`;
            const list = runs.get(key) ?? [];
            list.push({
              ...summarizeLatencies(result.latencies, result.errors),
              maxSendLagMs: result.maxSendLagMs,
            });
            runs.set(key, list);
          }
          ctx.log(`ack: run ${r} ${kind} ${shapeName(shape)} done`);
        }
      }
    }

    const rows: Row[] = [];
    const data: Record<string, unknown> = {
      role: cfg.role,
      connections: cfg.connections,
      durationMs: cfg.durationMs,
      cases: [] as unknown[],
    };
    const targets: Check[] = [];
    const checks: Check[] = [];
    for (const shape of shapes) {
      for (const kind of ['command', 'approve'] as const) {
        const bot = medianOf(runs.get(`${kind}|${shapeName(shape)}|cloudops`) ?? []);
        const baseline = medianOf(runs.get(`${kind}|${shapeName(shape)}|bare-bolt`) ?? []);
        (data.cases as unknown[]).push({
          kind,
          shape,
          cloudops: { runs: runs.get(`${kind}|${shapeName(shape)}|cloudops`), median: bot },
          bareBolt: { runs: runs.get(`${kind}|${shapeName(shape)}|bare-bolt`), median: baseline },
        });
        const label = `ack ${kind} ${shapeName(shape)}`;
        for (const [target, m] of [
          ['cloudops', bot],
          ['bare bolt', baseline],
        ] as const) {
          rows.push({
            scenario: label,
            target,
            figures: {
              p50_ms: round(m.p50),
              p99_ms: round(m.p99),
              max_ms: round(m.max),
              over_3s: m.over3s,
              errors: m.errors,
            },
          });
        }
        const ratio = bot.p99 / baseline.p99;
        targets.push({
          name: `${label}: p99 within 1.5x bare Bolt`,
          ok: ratio <= 1.5,
          detail: `${round(bot.p99)} ms vs ${round(baseline.p99)} ms (${round(ratio, 2)}x)`,
        });
        targets.push({
          name: `${label}: never over 3 s`,
          ok: bot.max <= 3000 && bot.over3s === 0,
          detail: `max ${round(bot.max)} ms, ${bot.over3s} over 3 s`,
        });
        targets.push({
          name: `${label}: every request answered 200`,
          ok: bot.errors === 0,
          detail: `${bot.errors} errors (median of runs)`,
        });
        // Nothing answered at all means the bench, not the bot, is broken (signature, URL).
        checks.push({
          name: `${label}: the bot answered`,
          ok: bot.count > 0,
          detail: `${bot.count} answered (median)`,
        });
      }
    }
    // Modals open after the ack: give the last ones time to arrive before counting.
    let slack = await sims.slackSummary();
    for (
      let waited = 0;
      (slack.callsByMethod['views.open'] ?? 0) < commandsAcked && waited < MODAL_WAIT_MS;
      waited += 250
    ) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      slack = await sims.slackSummary();
    }
    data.slack = slack;
    const opened = slack.callsByMethod['views.open'] ?? 0;
    targets.push({
      name: 'ack: every acked resize command opened its modal',
      ok: opened >= commandsAcked,
      detail: `${opened} views.open for ${commandsAcked} acked commands`,
    });
    checks.push({
      name: 'ack: the Slack stand-in saw no invalid call',
      ok: slack.problems === 0,
      detail:
        slack.problems === 0
          ? `${slack.callsByMethod['views.open'] ?? 0} views.open`
          : slack.firstProblems.join('; '),
    });
    return { rows, data, checks, targets };
  } finally {
    await bot?.stop().catch((error: Error) => ctx.log(`ack: bot stop: ${error.message}`));
    await sims?.close();
    await bare?.close();
    await load?.close();
  }
}
