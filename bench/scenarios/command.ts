import { ACTIONS } from '../../src/slack/blocks/request-message.ts';
import { type BareBoltProc, startBareBoltProc } from '../lib/bare-bolt.ts';
import { type BenchBot, startBenchBot } from '../lib/bot.ts';
import { BENCH } from '../lib/identity.ts';
import { type LoadGenerator, startLoadGenerator } from '../lib/load-generator.ts';
import type { LoadShape } from '../lib/load-protocol.ts';
import type { BenchContext, ScenarioResult } from '../lib/scenario.ts';
import { type Sims, startSims } from '../lib/sims.ts';
import { commandBody, newTriggerId, type SlackIdentity, sign } from '../lib/slack-request.ts';
import { median, round, showSpread, spread } from '../lib/stats.ts';

/** CPU per `/cloud resize` command at most this times a bare Bolt app's that opens the same modal. */
const RATIO_LIMIT = 1.3;
/** The command every run sends: its modal is what the baseline opens too. */
const COMMAND_TEXT = `resize ${BENCH.project} 101 cores=4`;
/** How long the bench waits for the modals the last commands open. */
const MODAL_WAIT_MS = 15_000;

/**
 * CPU per `/cloud resize` command (the path that opens a modal): signed commands from the load generator's process
 * at a steady rate to the bot alone in its process (ROLE=web), CPU time of that process from the first command until
 * every modal was opened on the Slack stand-in; against a bare Bolt app in its own process that acks and opens the
 * very modal the bot opened for the same command (taken from the stand-in), with Bolt's own client. The CPU each
 * process uses while idle over as long a time is measured next to each run and taken off. Interleaved pairs.
 */
export async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const cfg = ctx.config.command;
  let sims: Sims | undefined;
  let bot: BenchBot | undefined;
  let bare: BareBoltProc | undefined;
  /** The earlier baseline, reported beside: a bare Bolt app that acks and opens nothing. */
  let ackOnly: BareBoltProc | undefined;
  let load: LoadGenerator | undefined;
  try {
    sims = await startSims({ botToken: BENCH.botToken, teamId: BENCH.teamId });
    const activeSims = sims;
    bot = await startBenchBot(sims, {
      redisUrl: ctx.redisUrl,
      prefix: ctx.newPrefix('command'),
      role: 'web',
      logLevel: ctx.config.logLevel,
      logFile: ctx.logFile,
    });
    load = await startLoadGenerator();
    const activeLoad = load;
    const requester = {
      teamId: BENCH.teamId,
      channelId: BENCH.channel,
      userId: BENCH.requester,
      responseUrl: await sims.responseUrl(BENCH.channel, BENCH.requester),
    };
    const view = await botModal(bot, sims, requester);
    bare = await startBareBoltProc(BENCH.signingSecret, ACTIONS.approve, {
      slackApiUrl: sims.slackApiUrl,
      token: BENCH.botToken,
      view,
    });
    ackOnly = await startBareBoltProc(BENCH.signingSecret, ACTIONS.approve);
    const modals = async () => (await activeSims.slackSummary()).callsByMethod['views.open'] ?? 0;

    /** CPU ms per command of one run, idle CPU over the same time taken off. */
    const measure = async (
      target: { url: string; cpuMs(): Promise<number> },
      count: number,
      waitForModals: boolean,
    ) => {
      const shape: LoadShape = {
        type: 'rate',
        perSecond: cfg.perSecond,
        durationMs: Math.ceil((count * 1000) / cfg.perSecond),
      };
      const modalsBefore = waitForModals ? await modals() : 0;
      const cpuBefore = await target.cpuMs();
      const started = performance.now();
      const result = await activeLoad.run({
        url: target.url,
        secret: BENCH.signingSecret,
        who: requester,
        kind: { type: 'command', text: COMMAND_TEXT },
        shape,
        connections: 50,
        timeoutMs: 10_000,
      });
      if (result.errors > 0) throw new Error(`command: ${result.errors} errors (${result.firstError})`);
      let opened = 0;
      if (waitForModals) {
        const deadline = performance.now() + MODAL_WAIT_MS;
        for (;;) {
          opened = (await modals()) - modalsBefore;
          if (opened >= count || performance.now() > deadline) break;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
      const busyMs = performance.now() - started;
      const cpu = (await target.cpuMs()) - cpuBefore;
      // Idle for as long: timers and BullMQ connections cost a little without any command.
      const idleBefore = await target.cpuMs();
      await new Promise((resolve) => setTimeout(resolve, busyMs));
      const idle = (await target.cpuMs()) - idleBefore;
      return { cpuMsPerCommand: (cpu - idle) / count, rawCpuMsPerCommand: cpu / count, idleMs: idle, opened };
    };
    const botTarget = { url: bot.eventsUrl, cpuMs: bot.cpuMs };
    const bareTarget = { url: bare.url, cpuMs: bare.cpuMs };
    const ackOnlyTarget = { url: ackOnly.url, cpuMs: ackOnly.cpuMs };

    // A full-sized warm-up each: the first runs of a fresh process are still being optimised (JIT).
    ctx.log('command: warm-up');
    await measure(botTarget, cfg.count, true);
    await measure(bareTarget, cfg.count, true);
    await measure(ackOnlyTarget, cfg.count, false);

    type Run = Awaited<ReturnType<typeof measure>>;
    const botRuns: Run[] = [];
    const bareRuns: Run[] = [];
    const ackOnlyRuns: Run[] = [];
    for (let r = 1; r <= ctx.config.pairs; r++) {
      if (r % 2 === 1) {
        botRuns.push(await measure(botTarget, cfg.count, true));
        bareRuns.push(await measure(bareTarget, cfg.count, true));
        ackOnlyRuns.push(await measure(ackOnlyTarget, cfg.count, false));
      } else {
        ackOnlyRuns.push(await measure(ackOnlyTarget, cfg.count, false));
        bareRuns.push(await measure(bareTarget, cfg.count, true));
        botRuns.push(await measure(botTarget, cfg.count, true));
      }
      ctx.log(
        `command: pair ${r}: cloudops ${round(botRuns.at(-1)?.cpuMsPerCommand ?? 0, 3)} ms, bare Bolt opening the modal ${round(bareRuns.at(-1)?.cpuMsPerCommand ?? 0, 3)} ms, acking only ${round(ackOnlyRuns.at(-1)?.cpuMsPerCommand ?? 0, 3)} ms CPU per command`,
      );
    }
    const cpu = spread(botRuns.map((r) => r.cpuMsPerCommand));
    const bareCpu = spread(bareRuns.map((r) => r.cpuMsPerCommand));
    const ratio = spread(
      botRuns.map((r, i) => r.cpuMsPerCommand / (bareRuns[i]?.cpuMsPerCommand ?? Number.NaN)),
    );
    const ackOnlyCpu = spread(ackOnlyRuns.map((r) => r.cpuMsPerCommand));
    const ackOnlyRatio = spread(
      botRuns.map((r, i) => r.cpuMsPerCommand / (ackOnlyRuns[i]?.cpuMsPerCommand ?? Number.NaN)),
    );
    const slack = await sims.slackSummary();
    const label = `command ${cfg.count} × /cloud resize at ${cfg.perSecond}/s`;
    return {
      rows: [
        {
          scenario: label,
          target: 'cloudops web (own process)',
          figures: {
            cpu_ms_per_cmd: showSpread(cpu, 3),
            raw_cpu_ms: round(median(botRuns.map((r) => r.rawCpuMsPerCommand)), 3),
          },
        },
        {
          scenario: label,
          target: 'bare bolt opening the modal',
          figures: {
            cpu_ms_per_cmd: showSpread(bareCpu, 3),
            raw_cpu_ms: round(median(bareRuns.map((r) => r.rawCpuMsPerCommand)), 3),
          },
        },
        { scenario: label, target: 'ratio', figures: { cpu_ms_per_cmd: showSpread(ratio, 2, '×') } },
        {
          scenario: label,
          target: 'bare bolt acking only',
          figures: {
            cpu_ms_per_cmd: showSpread(ackOnlyCpu, 3),
            raw_cpu_ms: round(median(ackOnlyRuns.map((r) => r.rawCpuMsPerCommand)), 3),
          },
        },
        {
          scenario: label,
          target: 'ratio to acking only',
          figures: { cpu_ms_per_cmd: showSpread(ackOnlyRatio, 2, '×') },
        },
      ],
      data: {
        ...cfg,
        pairs: ctx.config.pairs,
        cpu,
        bareCpu,
        ratio,
        ackOnlyCpu,
        ackOnlyRatio,
        botRuns,
        bareRuns,
        ackOnlyRuns,
      },
      checks: [
        {
          name: 'command: every acked command opened its modal (bot, then bare Bolt)',
          ok: [...botRuns, ...bareRuns].every((r) => r.opened >= cfg.count),
          detail: [...botRuns, ...bareRuns].map((r) => `${r.opened} of ${cfg.count}`).join(', '),
        },
        {
          name: 'command: the Slack stand-in saw no invalid call',
          ok: slack.problems === 0,
          detail: slack.problems === 0 ? 'none' : slack.firstProblems.join('; '),
        },
      ],
      targets: [
        {
          name: `CPU per /cloud resize command ≤ ${RATIO_LIMIT}× bare Bolt opening the same modal`,
          ok: ratio.median <= RATIO_LIMIT,
          detail: `${showSpread(cpu, 3, ' ms')} vs ${showSpread(bareCpu, 3, ' ms')}: ${showSpread(ratio, 2, '×')}`,
          figure: cpu,
          baseline: bareCpu,
          ratio,
          limit: `≤ ${RATIO_LIMIT}×`,
          unit: ' ms',
        },
      ],
    };
  } finally {
    await bot?.stop().catch((error: Error) => ctx.log(`command: bot stop: ${error.message}`));
    await bare?.close().catch(() => undefined);
    await ackOnly?.close().catch(() => undefined);
    await load?.close();
    await sims?.close();
  }
}

/** The modal the bot opens for the bench's command, as it sent it: one signed command with a known trigger. */
async function botModal(bot: BenchBot, sims: Sims, requester: SlackIdentity): Promise<unknown> {
  const trigger = newTriggerId();
  const signed = sign(BENCH.signingSecret, commandBody(requester, COMMAND_TEXT, trigger));
  const response = await fetch(bot.eventsUrl, { method: 'POST', headers: signed.headers, body: signed.body });
  if (!response.ok) throw new Error(`command: the bot answered HTTP ${response.status}`);
  return sims.sentView(trigger, MODAL_WAIT_MS);
}
