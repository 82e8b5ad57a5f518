import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { freePort } from '../../sim/local-redis.ts';
import { ACTIONS } from '../../src/slack/blocks/request-message.ts';
import { type AllocationSampling, startAllocationSampling } from '../lib/alloc-profile.ts';
import { startBareFlow } from '../lib/bare-flow.ts';
import { benchEnv } from '../lib/bot.ts';
import { type ReadyChild, spawnReady } from '../lib/child.ts';
import { BENCH, benchPolicyYaml } from '../lib/identity.ts';
import { type LoadGenerator, startLoadGenerator } from '../lib/load-generator.ts';
import type { BenchContext, ScenarioResult } from '../lib/scenario.ts';
import { type Sims, startSims } from '../lib/sims.ts';
import {
  clickBody,
  commandBody,
  newTriggerId,
  type SlackIdentity,
  submissionBody,
} from '../lib/slack-request.ts';
import { START_NODE_ARGS } from '../lib/start-args.ts';
import { round, type Spread, showSpread, spread } from '../lib/stats.ts';

/** First VM id of the steady scenario's VMs (each run resizes VMs of its own, so every resize changes something). */
const FIRST_VMID = 70_000;
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Issue 29: resident memory under steady load within 1.3× a bare Bolt + BullMQ app doing the same hops. */
const RATIO_LIMIT = 1.3;
/** Requests after which memory is read, besides before the first and after the last. */
const MARKS = [100, 300];

/** Memory of a process at one point of a run, in MB. */
interface Sample {
  requests: number;
  rssMb: number;
  /** CPU time the process used since it started (user + system), ms: what a smaller young generation costs. */
  cpuMs: number;
  heapUsedMb: number;
  heapTotalMb: number;
  externalMb: number;
  /** V8's young generation as reserved (both semi-spaces): garbage of recent requests lives there. */
  newSpaceMb: number;
  /** The old generation: what is in use (live or garbage not yet collected) and what is reserved. */
  oldUsedMb: number;
  oldTotalMb: number;
}

interface Run {
  samples: Sample[];
  /** Flows whose command, submission and click were all answered 200 and whose modal and message came. */
  clicked: number;
  /** Flows whose resize reached the cloud API and whose thread reply came after it. */
  replied: number;
  elapsedMs: number;
  failures: string[];
}

/** A process under test: where Slack posts, its resident memory and its V8 heap. */
interface Target {
  eventsUrl: string;
  child: ReadyChild;
  heap(): Promise<Heap>;
  /** With BENCH_ALLOC_PROFILE set, the first bot run's inspector port (allocation sampling over the run). */
  inspectPort?: number;
}

const MB = 1024 * 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Heap = Omit<Sample, 'requests' | 'rssMb' | 'cpuMs'>;

/** User + system CPU of a process from /proc (clock ticks of 10 ms). */
async function cpuMsOf(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** nodejs_heap_size_used_bytes and friends (prom-client's default metrics) from a Prometheus text page. */
function heapFromMetrics(text: string): Heap {
  const read = (name: string) => {
    const line = new RegExp(`^${name.replace(/[{}]/g, '\\$&')} ([0-9.e+]+)`, 'm').exec(text);
    return Number(line?.[1]) / MB;
  };
  return {
    heapUsedMb: read('nodejs_heap_size_used_bytes'),
    heapTotalMb: read('nodejs_heap_size_total_bytes'),
    externalMb: read('nodejs_external_memory_bytes'),
    newSpaceMb: read('nodejs_heap_space_size_total_bytes{space="new"}'),
    oldUsedMb: read('nodejs_heap_space_size_used_bytes{space="old"}'),
    oldTotalMb: read('nodejs_heap_space_size_total_bytes{space="old"}'),
  };
}

/** The same figures from the bare app's /memory (process.memoryUsage() and v8.getHeapSpaceStatistics()). */
function heapFromBare(body: string): Heap {
  const m = JSON.parse(body) as NodeJS.MemoryUsage & {
    spaces: { space_name: string; space_size: number; space_used_size: number }[];
  };
  const space = (name: string) => m.spaces.find((s) => s.space_name === name);
  return {
    heapUsedMb: m.heapUsed / MB,
    heapTotalMb: m.heapTotal / MB,
    externalMb: m.external / MB,
    newSpaceMb: (space('new_space')?.space_size ?? Number.NaN) / MB,
    oldUsedMb: (space('old_space')?.space_used_size ?? Number.NaN) / MB,
    oldTotalMb: (space('old_space')?.space_size ?? Number.NaN) / MB,
  };
}

/** V8 flags added on both sides for an experiment (BENCH_STEADY_NODE_ARGS, e.g. `--max-semi-space-size=4`). */
const NODE_ARGS = (process.env.BENCH_STEADY_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);

async function getText(url: string): Promise<string> {
  const response = await request(url, { headersTimeout: 10_000, bodyTimeout: 10_000 });
  return response.body.text();
}

/**
 * Steady load: N whole resizes one after another at a steady rate, each as a person does it (signed HTTP from the
 * load generator's process): `/cloud resize` → the modal (views.open on the Slack stand-in) → its submission →
 * the request message → an approver's Approve click → the resize POSTed to the cloud simulator → the thread reply.
 * The compiled bot runs as its own process as `npm start` runs it (`node <its flags> dist/src/main.js`, ROLE=all);
 * resident memory (VmRSS), CPU and the V8 heap (/metrics) are read before the first request, after 100 and 300,
 * and after the last reply. Baseline: a bare Bolt + BullMQ app (bench/lib/bare-flow-main.ts) doing the same hops,
 * same rate and count, on the same Node flags. A fresh process per run, bot and bare alternating.
 */
export async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const cfg = ctx.config.steady;
  const n = cfg.flows;
  const pairs = ctx.config.pairs;
  let sims: Sims | undefined;
  let load: LoadGenerator | undefined;
  const dir = await mkdtemp(join(tmpdir(), 'cloudops-bench-steady-'));
  const children: ReadyChild[] = [];
  const heapDir = process.env.BENCH_HEAP_BOT ? resolve(process.env.BENCH_HEAP_BOT) : undefined;
  const allocFile = process.env.BENCH_ALLOC_PROFILE ? resolve(process.env.BENCH_ALLOC_PROFILE) : undefined;
  try {
    sims = await startSims({
      botToken: BENCH.botToken,
      teamId: BENCH.teamId,
      seedVms: { count: n * pairs * 2, firstVmid: FIRST_VMID },
    });
    const activeSims = sims;
    const policyFile = join(dir, 'policy.yml');
    await writeFile(policyFile, benchPolicyYaml(sims.projectUuid));
    execFileSync(process.execPath, ['scripts/build.mjs', '--if-stale'], { cwd: ROOT, stdio: 'inherit' });
    load = await startLoadGenerator();
    const activeLoad = load;
    const requester: SlackIdentity = {
      teamId: BENCH.teamId,
      channelId: BENCH.channel,
      userId: BENCH.requester,
      responseUrl: await sims.responseUrl(BENCH.channel, BENCH.requester),
    };
    const approver: SlackIdentity = {
      ...requester,
      userId: BENCH.approver,
      responseUrl: await sims.responseUrl(BENCH.channel, BENCH.approver),
    };

    const startBot = async (profile: boolean): Promise<Target> => {
      const port = await freePort();
      const inspectPort = profile ? await freePort() : undefined;
      const metricsPort = await freePort();
      const env = {
        ...benchEnv(activeSims, {
          redisUrl: ctx.redisUrl,
          prefix: ctx.newPrefix('steady'),
          role: 'all',
          logLevel: ctx.config.logLevel,
          port,
          policyFile,
        }),
        METRICS_PORT: String(metricsPort),
      };
      if (heapDir) await mkdir(heapDir, { recursive: true });
      const child = await spawnReady({
        script: 'dist/src/main.js',
        // BENCH_HEAP_BOT: SIGUSR2 writes a heap snapshot there; BENCH_ALLOC_PROFILE: the inspector, for sampling.
        nodeArgs: [
          ...START_NODE_ARGS,
          ...NODE_ARGS,
          ...(heapDir ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${heapDir}`] : []),
          ...(inspectPort ? [`--inspect=127.0.0.1:${inspectPort}`] : []),
        ],
        env,
        readyUrl: `http://127.0.0.1:${port}/readyz`,
        timeoutMs: cfg.readyTimeoutMs,
        logFile: ctx.logFile,
        cwd: ROOT,
      });
      children.push(child);
      return {
        eventsUrl: `http://127.0.0.1:${port}/slack/events`,
        child,
        heap: async () => heapFromMetrics(await getText(`http://127.0.0.1:${metricsPort}/metrics`)),
        inspectPort,
      };
    };
    const startBare = async (): Promise<Target> => {
      const bare = await startBareFlow({
        sims: activeSims,
        redisUrl: ctx.redisUrl,
        prefix: ctx.newPrefix('steady-bare'),
        readyTimeoutMs: cfg.readyTimeoutMs,
        logFile: ctx.logFile,
        // Node as the bot runs (npm start's flags).
        nodeArgs: [...START_NODE_ARGS, ...NODE_ARGS],
      });
      children.push(bare.child);
      return {
        eventsUrl: bare.eventsUrl,
        child: bare.child,
        heap: async () => heapFromBare(await getText(`http://127.0.0.1:${bare.port}/memory`)),
      };
    };

    /** Sends one signed form body to the target; throws unless it was answered 200. */
    const send = async (target: Target, who: SlackIdentity, body: string, what: string) => {
      const result = await activeLoad.run({
        url: target.eventsUrl,
        secret: BENCH.signingSecret,
        who,
        kind: { type: 'form', bodies: [body] },
        shape: { type: 'burst', count: 1 },
        connections: 8,
        timeoutMs: cfg.stepTimeoutMs,
      });
      if (result.errors > 0) throw new Error(`${what}: ${result.firstError}`);
    };

    /** One resize from the command to the click; the reply is waited for with all others at the end. */
    const flow = async (target: Target, vmid: number) => {
      const trigger = newTriggerId();
      await send(
        target,
        requester,
        commandBody(requester, `resize ${BENCH.project} ${vmid} cores=4`, trigger),
        'command',
      );
      const view = await activeSims.openedView(trigger, cfg.stepTimeoutMs);
      await send(target, requester, submissionBody(requester, view, { reason: 'steady load' }), 'submission');
      const message = await activeSims.requestMessage(vmid, cfg.stepTimeoutMs);
      const value = approveValue(message.blocks);
      if (value === undefined) throw new Error(`the message about VM ${vmid} has no Approve button`);
      await send(target, approver, clickBody(approver, ACTIONS.approve, value, message.ts), 'click');
      return message.ts;
    };

    const sample = async (target: Target, requests: number): Promise<Sample> => ({
      requests,
      rssMb: await target.child.rssMb(),
      cpuMs: await cpuMsOf(target.child.pid),
      ...(await target.heap()),
    });

    const drive = async (target: Target, firstVmid: number, snapshot: boolean): Promise<Run> => {
      await sleep(cfg.settleMs);
      const samples: Sample[] = [await sample(target, 0)];
      // Idle and after the last reply, to compare what is live (a snapshot collects garbage first).
      if (snapshot && heapDir) await writeHeapSnapshot(target.child, heapDir, ctx.log);
      let allocations: AllocationSampling | undefined;
      if (target.inspectPort) allocations = await startAllocationSampling(target.inspectPort);
      const since = performance.timeOrigin + performance.now();
      const failures: string[] = [];
      const posted = new Map<number, string>();
      let clicked = 0;
      const sampling: Promise<void>[] = [];
      const flows: Promise<void>[] = [];
      const intervalMs = 1000 / cfg.perSecond;
      const start = performance.now();
      for (let i = 0; i < n; i++) {
        const wait = start + i * intervalMs - performance.now();
        if (wait > 0) await sleep(wait);
        const vmid = firstVmid + i;
        flows.push(
          flow(target, vmid).then(
            (ts) => {
              posted.set(vmid, ts);
              clicked++;
              if (MARKS.includes(clicked) && clicked < n)
                sampling.push(sample(target, clicked).then((s) => void samples.push(s)));
            },
            (error: Error) => void failures.push(`VM ${vmid}: ${error.message}`),
          ),
        );
      }
      await Promise.all(flows);
      await Promise.all(sampling);
      // Every resize reached the API, and its thread reply came after the call.
      const deadline = performance.now() + cfg.replyTimeoutMs;
      let replied = 0;
      for (;;) {
        const times = await activeSims.callTimes(since);
        const apiAt = new Map<number, number>();
        for (const r of times.resizes) if (!apiAt.has(r.vmid)) apiAt.set(r.vmid, r.atMs);
        const repliedTs = new Map<string, number>();
        // The latest reply of each thread: the bot's result comes after its approval notice; the bare app posts one.
        for (const r of times.replies)
          repliedTs.set(r.threadTs, Math.max(repliedTs.get(r.threadTs) ?? 0, r.atMs));
        replied = 0;
        for (const [vmid, ts] of posted) {
          const api = apiAt.get(vmid);
          const reply = repliedTs.get(ts);
          if (api !== undefined && reply !== undefined && reply > api) replied++;
        }
        if (replied >= posted.size || performance.now() > deadline) break;
        await sleep(250);
      }
      const elapsedMs = performance.now() - start;
      samples.push(await sample(target, n));
      samples.sort((a, b) => a.requests - b.requests);
      if (allocations && allocFile) {
        const allocated = await allocations.stop();
        await writeFile(allocFile, JSON.stringify(allocated, null, 2));
        ctx.log(
          `steady: the bot allocated ${allocated.totalMb} MB over ${n} resizes (${round(allocated.totalMb / n, 3)} MB each); by its own code: ${allocated.byOwnCode
            .slice(0, 12)
            .map((a) => `${a.where} ${a.mb} MB`)
            .join('; ')} (all in ${allocFile})`,
        );
      }
      if (snapshot && heapDir) await writeHeapSnapshot(target.child, heapDir, ctx.log);
      return { samples, clicked, replied, elapsedMs, failures };
    };

    const botRuns: Run[] = [];
    const bareRuns: Run[] = [];
    let nextVmid = FIRST_VMID;
    const once = async (kind: 'bot' | 'bare') => {
      const first = botRuns.length === 0;
      const target = kind === 'bot' ? await startBot(first && allocFile !== undefined) : await startBare();
      const result = await drive(target, nextVmid, kind === 'bot' && first);
      nextVmid += n;
      await target.child.stop();
      (kind === 'bot' ? botRuns : bareRuns).push(result);
      const at = (s: Sample) =>
        `${s.requests}: ${round(s.rssMb)} MB RSS, heap ${round(s.heapUsedMb)}/${round(s.heapTotalMb)} MB (new ${round(s.newSpaceMb)}, old ${round(s.oldUsedMb)}/${round(s.oldTotalMb)})`;
      ctx.log(`steady: ${kind} run: ${result.samples.map(at).join('; ')}; ${result.replied}/${n} replied`);
    };
    for (let r = 1; r <= pairs; r++) {
      // Alternating which goes first, so a slow moment of the machine does not always fall on the same side.
      if (r % 2 === 1) {
        await once('bot');
        await once('bare');
      } else {
        await once('bare');
        await once('bot');
      }
    }

    const last = (r: Run) => r.samples.at(-1) as Sample;
    const at = (runs: Run[], requests: number, pick: (s: Sample) => number): Spread =>
      spread(
        runs
          .map((r) => r.samples.find((s) => s.requests === requests))
          .filter((s) => s !== undefined)
          .map(pick),
      );
    const points = [0, ...MARKS.filter((m) => m < n), n];
    const rss = spread(botRuns.map((r) => last(r).rssMb));
    const bareRss = spread(bareRuns.map((r) => last(r).rssMb));
    const ratio = spread(botRuns.map((r, i) => last(r).rssMb / last(bareRuns[i] as Run).rssMb));
    const label = `steady ${n} resizes at ${cfg.perSecond}/s (command → modal → submit → approve → API → reply)`;
    const rows = (name: string, runs: Run[]) =>
      points.map((p) => ({
        scenario: label,
        target: `${name} after ${p}`,
        figures: {
          rss_mb: showSpread(
            at(runs, p, (s) => s.rssMb),
            1,
          ),
          heap_used_mb: showSpread(
            at(runs, p, (s) => s.heapUsedMb),
            1,
          ),
          heap_total_mb: showSpread(
            at(runs, p, (s) => s.heapTotalMb),
            1,
          ),
          external_mb: showSpread(
            at(runs, p, (s) => s.externalMb),
            1,
          ),
        },
      }));
    const allFlows = (runs: Run[]) => runs.every((r) => r.clicked === n && r.replied === n);
    const detailFlows = (runs: Run[]) =>
      runs
        .map((r) => `${r.clicked}/${r.replied} of ${n}${r.failures[0] ? ` (${r.failures[0]})` : ''}`)
        .join(', ');
    return {
      rows: [
        ...rows('cloudops (compiled, own process)', botRuns),
        ...rows('bare bolt+bullmq (own process)', bareRuns),
        { scenario: label, target: 'ratio', figures: { rss_mb: showSpread(ratio, 2, '×') } },
      ],
      data: { ...cfg, pairs, points, botRuns, bareRuns, rss, bareRss, ratio },
      checks: [
        {
          name: 'steady: every resize of the bot opened its modal, was requested, approved, run and replied to',
          ok: allFlows(botRuns),
          detail: detailFlows(botRuns),
        },
        {
          name: 'steady: every resize of the bare app went through the same hops',
          ok: allFlows(bareRuns),
          detail: detailFlows(bareRuns),
        },
      ],
      targets: [
        {
          name: `RSS after ${n} steady resizes within ${RATIO_LIMIT}× a bare Bolt + BullMQ app doing the same hops`,
          ok: ratio.median <= RATIO_LIMIT,
          detail: `${showSpread(rss, 1, ' MB')} vs ${showSpread(bareRss, 1, ' MB')}: ${showSpread(ratio, 2, '×')}; heap used ${showSpread(
            at(botRuns, n, (s) => s.heapUsedMb),
            1,
            ' MB',
          )} vs ${showSpread(
            at(bareRuns, n, (s) => s.heapUsedMb),
            1,
            ' MB',
          )}`,
          figure: rss,
          baseline: bareRss,
          ratio,
          limit: `≤ ${RATIO_LIMIT}×`,
          unit: ' MB',
        },
      ],
    };
  } finally {
    for (const child of children) await child.stop(3000).catch(() => undefined);
    await load?.close();
    await sims?.close();
    await rm(dir, { recursive: true, force: true });
  }
}

/** The value of the message's Approve button: the request id for the bot, whatever the bare app put there. */
function approveValue(blocks: unknown[]): string | undefined {
  for (const block of blocks as { type?: string; elements?: { action_id?: string; value?: string }[] }[]) {
    if (block.type !== 'actions') continue;
    const button = block.elements?.find((e) => e.action_id === ACTIONS.approve);
    if (button?.value) return button.value;
  }
  return undefined;
}

/** SIGUSR2 (the bot runs with --heapsnapshot-signal), then waits until the snapshot file stops growing. */
async function writeHeapSnapshot(child: ReadyChild, dir: string, log: (m: string) => void): Promise<void> {
  const before = new Set(await readdir(dir));
  process.kill(child.pid, 'SIGUSR2');
  const deadline = performance.now() + 120_000;
  let lastSize = -1;
  while (performance.now() < deadline) {
    await sleep(1000);
    const file = (await readdir(dir)).find((f) => f.endsWith('.heapsnapshot') && !before.has(f));
    if (!file) continue;
    const size = (await stat(join(dir, file))).size;
    if (size > 0 && size === lastSize) {
      log(`steady: heap snapshot of the bot: ${join(dir, file)} (${round(size / MB)} MB)`);
      return;
    }
    lastSize = size;
  }
  log('steady: no heap snapshot within 2 minutes');
}
