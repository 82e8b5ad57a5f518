import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { freePort } from '../../sim/local-redis.ts';
import { newAgentToken, tokenHash } from '../../src/config/agents.ts';
import { ACTIONS } from '../../src/slack/blocks/request-message.ts';
import { type BenchBot, startBenchBot } from '../lib/bot.ts';
import { BENCH } from '../lib/identity.ts';
import { forkProc, type Proc } from '../lib/proc.ts';
import type { BenchContext, ScenarioResult } from '../lib/scenario.ts';
import { type Sims, startSims } from '../lib/sims.ts';
import { buttonClick } from '../lib/slack-request.ts';
import { percentile, round, type Spread, showSpread, spread } from '../lib/stats.ts';

/** First VM id of this scenario's VMs: one per request. */
const FIRST_VMID = 90_000;

const epochMs = () => performance.timeOrigin + performance.now();
const sorted = (values: number[]) => values.toSorted((a, b) => a - b);

interface McpRun {
  /** request_resize sent → its request message posted in the channel (the Slack stand-in's clock). */
  toMessageP50: number;
  toMessageP99: number;
  /** Approve click sent → the get_request waiting since before it answered. */
  approvalToAnswerP50: number;
  approvalToAnswerP99: number;
  /** The bare SDK server's no-op tool call, round trip. */
  bareP50: number;
  bareP99: number;
}

/** An SDK client over Streamable HTTP to `url`, with `token` as its bearer when given. */
async function client(url: string, token?: string): Promise<Client> {
  const c = new Client({ name: 'bench-agent', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: token ? { headers: { authorization: `Bearer ${token}` } } : undefined,
  });
  await c.connect(transport as Transport);
  return c;
}

const call = async (c: Client, name: string, args: Record<string, unknown>) =>
  (await c.callTool({ name, arguments: args }, undefined, { timeout: 90_000 })) as CallToolResult;

/**
 * Agents over MCP: the bot (ROLE=all, its own process) with MCP_PORT, an agent asking through the SDK's client.
 * Per run: `requests` request_resize calls one after another, each timed to its request message in the channel;
 * then each request approved by a signed click while a get_request with a wait is open, timed from the click to the
 * answer. The baseline, interleaved by pairs: a bare SDK server (its own process, stateless like the bot's) answering
 * a no-op tool, its round trip.
 */
export async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const cfg = ctx.config.mcp;
  const n = cfg.requests;
  let sims: Sims | undefined;
  let bot: BenchBot | undefined;
  let bareProc: Proc | undefined;
  const clients: Client[] = [];
  try {
    sims = await startSims({
      botToken: BENCH.botToken,
      teamId: BENCH.teamId,
      seedVms: { count: n * (ctx.config.pairs + 1), firstVmid: FIRST_VMID },
    });
    const activeSims = sims;
    const token = newAgentToken();
    const mcpPort = await freePort();
    bot = await startBenchBot(sims, {
      redisUrl: ctx.redisUrl,
      prefix: ctx.newPrefix('mcp'),
      role: 'all',
      logLevel: ctx.config.logLevel,
      logFile: ctx.logFile,
      policyPrefix: [
        'agents:',
        `  - { name: bench-agent, token_sha256: ${tokenHash(token)}, on_behalf_of: ${BENCH.requester}, projects: [${BENCH.project}], requests_per_hour: 10000 }`,
        '',
      ].join('\n'),
      env: { MCP_PORT: String(mcpPort) },
    });
    const activeBot = bot;
    bareProc = forkProc(new URL('../lib/bare-mcp-child.ts', import.meta.url), 'bare MCP');
    const bareUrl = await bareProc.call<string>({ op: 'start' });
    const agent = await client(`http://127.0.0.1:${mcpPort}/mcp`, token);
    const bare = await client(bareUrl);
    clients.push(agent, bare);
    const approver = {
      teamId: BENCH.teamId,
      channelId: BENCH.channel,
      userId: BENCH.approver,
      responseUrl: await sims.responseUrl(BENCH.channel, BENCH.approver),
    };
    let nextVm = FIRST_VMID;

    const topLevel = async () => (await activeSims.slackSummary()).topLevelPerChannel[BENCH.channel] ?? 0;
    const cloudopsRun = async () => {
      const ids: string[] = [];
      const toMessage: number[] = [];
      for (let i = 0; i < n; i++) {
        const before = await topLevel();
        const sentAt = epochMs();
        const asked = await call(agent, 'request_resize', {
          project: BENCH.project,
          vm_id: nextVm++,
          cores: 4,
          reason: 'bench',
        });
        if (asked.isError) throw new Error(`mcp: request_resize refused: ${JSON.stringify(asked.content)}`);
        ids.push(String((asked.structuredContent as { request_id: string }).request_id));
        // Only this request's message is posted meanwhile: the last post is its time.
        const deadline = performance.now() + cfg.timeoutMs;
        for (;;) {
          const summary = await activeSims.slackSummary();
          if ((summary.topLevelPerChannel[BENCH.channel] ?? 0) > before && summary.lastPostAt) {
            toMessage.push(summary.lastPostAt - sentAt);
            break;
          }
          if (performance.now() > deadline) throw new Error('mcp: a request message never came');
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
      }
      const toAnswer: number[] = [];
      for (const id of ids) {
        const waiting = call(agent, 'get_request', { request_id: id, wait_seconds: 30 });
        // The wait is open at the bot before the click (a call takes a few ms to arrive).
        await new Promise((resolve) => setTimeout(resolve, 50));
        const click = buttonClick(BENCH.signingSecret, approver, ACTIONS.approve, id);
        const clickedAt = epochMs();
        const response = await fetch(activeBot.eventsUrl, {
          method: 'POST',
          headers: click.headers,
          body: click.body,
        });
        if (!response.ok) throw new Error(`mcp: the approve click got ${response.status}`);
        const answered = await waiting;
        const answeredAt = epochMs();
        const state = (answered.structuredContent as { state?: string } | undefined)?.state;
        if (state === 'pending') throw new Error(`mcp: get_request answered before the approval (${id})`);
        toAnswer.push(answeredAt - clickedAt);
      }
      return { toMessage: sorted(toMessage), toAnswer: sorted(toAnswer) };
    };
    const bareRun = async () => {
      const times: number[] = [];
      for (let i = 0; i < n; i++) {
        const at = performance.now();
        await call(bare, 'noop', {});
        times.push(performance.now() - at);
      }
      return sorted(times);
    };

    ctx.log('mcp: warm-up');
    await cloudopsRun();
    await bareRun();
    const runs: McpRun[] = [];
    for (let r = 1; r <= ctx.config.pairs; r++) {
      // Alternating which goes first, so a slow moment of the machine does not always fall on the same side.
      let bot: Awaited<ReturnType<typeof cloudopsRun>>;
      let base: number[];
      if (r % 2 === 1) {
        bot = await cloudopsRun();
        base = await bareRun();
      } else {
        base = await bareRun();
        bot = await cloudopsRun();
      }
      const one: McpRun = {
        toMessageP50: percentile(bot.toMessage, 50),
        toMessageP99: percentile(bot.toMessage, 99),
        approvalToAnswerP50: percentile(bot.toAnswer, 50),
        approvalToAnswerP99: percentile(bot.toAnswer, 99),
        bareP50: percentile(base, 50),
        bareP99: percentile(base, 99),
      };
      runs.push(one);
      ctx.log(
        `mcp: pair ${r}: request → message p50 ${round(one.toMessageP50, 1)} ms, approval → answer p50 ${round(one.approvalToAnswerP50, 1)} ms, bare no-op p50 ${round(one.bareP50, 2)} ms`,
      );
    }
    const s = (pick: (r: McpRun) => number): Spread => spread(runs.map(pick));
    const figures = {
      toMessageP50: s((r) => r.toMessageP50),
      toMessageP99: s((r) => r.toMessageP99),
      approvalToAnswerP50: s((r) => r.approvalToAnswerP50),
      approvalToAnswerP99: s((r) => r.approvalToAnswerP99),
      bareP50: s((r) => r.bareP50),
      bareP99: s((r) => r.bareP99),
      toMessageRatioP50: s((r) => r.toMessageP50 / r.bareP50),
      toMessageRatioP99: s((r) => r.toMessageP99 / r.bareP99),
      answerRatioP50: s((r) => r.approvalToAnswerP50 / r.bareP50),
      answerRatioP99: s((r) => r.approvalToAnswerP99 / r.bareP99),
    };
    const label = `mcp ${n} requests`;
    const row = (target: string, p50: Spread, p99: Spread, unit = ' ms', digits = 1) => ({
      scenario: label,
      target,
      figures: { p50: showSpread(p50, digits, unit), p99: showSpread(p99, digits, unit) },
    });
    const target = (name: string, figure: Spread, ratio: Spread): ScenarioResult['targets'][number] => ({
      name,
      ok: true,
      detail: `${showSpread(figure, 1, ' ms')} against a bare no-op tool call ${showSpread(figures.bareP50, 2, ' ms')}: ${showSpread(ratio, 1, '×')}`,
      figure,
      baseline: figures.bareP50,
      ratio,
      limit: 'reported',
      unit: ' ms',
    });
    return {
      rows: [
        row('request_resize → request message in the channel', figures.toMessageP50, figures.toMessageP99),
        row(
          'approval click → get_request (waiting) answers',
          figures.approvalToAnswerP50,
          figures.approvalToAnswerP99,
        ),
        row('bare SDK server, no-op tool call', figures.bareP50, figures.bareP99, ' ms', 2),
        row('ratio request → message / bare', figures.toMessageRatioP50, figures.toMessageRatioP99, '×'),
        row('ratio approval → answer / bare', figures.answerRatioP50, figures.answerRatioP99, '×'),
      ],
      data: { requests: n, pairs: ctx.config.pairs, ...figures, runs },
      checks: [
        {
          name: 'mcp: every request was posted and every wait answered after its approval',
          ok: runs.length === ctx.config.pairs,
          detail: `${runs.length} pairs of ${n} requests`,
        },
      ],
      targets: [
        target(
          'mcp: request_resize → request message p50 (reported)',
          figures.toMessageP50,
          figures.toMessageRatioP50,
        ),
        target(
          'mcp: approval → get_request answer p50 (reported)',
          figures.approvalToAnswerP50,
          figures.answerRatioP50,
        ),
      ],
    };
  } finally {
    await Promise.allSettled(clients.map((c) => c.close()));
    await bot?.stop().catch((error: Error) => ctx.log(`mcp: bot stop: ${error.message}`));
    await bareProc?.close().catch(() => undefined);
    await sims?.close();
  }
}
