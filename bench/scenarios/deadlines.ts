import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { killGroup, spawnGroup } from '../../sim/process-group.ts';
import { type SlackStandIn, startSlackStandIn } from '../../sim/slack/server.ts';
import { BENCH } from '../lib/identity.ts';
import type { BenchContext, Check, ScenarioResult } from '../lib/scenario.ts';
import { START_NODE_ARGS } from '../lib/start-args.ts';
import { round, type Spread, spread } from '../lib/stats.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The time budgets of docs/operations.md#start-up, which the tests prove as behaviour but do not time (a loaded
 * machine would fail any budget): a start-up that cannot finish (Slack never answers) exits 1 within 10 s of the
 * spawn; SIGTERM while the start-up waits (for Redis) ends it within 3 s; SIGTERM of a ready worker within 5 s.
 */
const BUDGET_MS = { failedStart: 10_000, stopWhileStarting: 3_000, stopReady: 5_000 };

interface Exit {
  code: number | null;
  /** ms from the spawn (or from the signal, when one was sent) to the exit. */
  ms: number;
}

/** The compiled bot as `npm start` runs it, in a process group of its own; its stdout kept. */
function spawnBot(env: Record<string, string>, cwd: string) {
  const started = performance.now();
  const child = spawnGroup(process.execPath, [...START_NODE_ARGS, join(ROOT, 'dist/src/main.js')], {
    cwd,
    env: { PATH: process.env.PATH ?? '', METRICS_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr?.resume();
  const exited = new Promise<number>((resolve) => child.once('exit', () => resolve(performance.now())));
  const whenLogged = (msg: string) =>
    new Promise<void>((resolve, reject) => {
      const look = () => {
        if (stdout.includes(`"msg":"${msg}"`)) {
          child.stdout?.off('data', look);
          resolve();
        }
      };
      child.stdout?.on('data', look);
      void exited.then(() =>
        reject(new Error(`the bot exited before logging "${msg}": ${stdout.slice(-500)}`)),
      );
      look();
    });
  return {
    whenLogged,
    /** Waits for the exit; ms counted from the spawn, or from `signal` sent once `after` was logged. */
    async exit(signal?: NodeJS.Signals, after?: string): Promise<Exit> {
      let from = started;
      if (signal && after) {
        await whenLogged(after);
        from = performance.now();
        killGroup(child, signal);
      }
      const at = await exited;
      return { code: child.exitCode, ms: at - from };
    },
    kill: () => killGroup(child),
  };
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
}

export async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const runs = ctx.config.runs;
  execFileSync(process.execPath, [join(ROOT, 'scripts/build.mjs'), '--if-stale'], { stdio: 'inherit' });
  const dir = await mkdtemp(join(tmpdir(), 'cloudops-bench-deadlines-'));
  const policyFile = join(dir, 'policy.yml');
  await writeFile(policyFile, 'approvers: [U0ADMIN]\n');
  // A Slack that accepts connections and never answers; a "Redis" that drops every connection at once.
  const hanging = createServer(() => undefined);
  const down = createServer((req) => req.socket.destroy());
  down.on('connection', (socket) => socket.destroy());
  let slack: SlackStandIn | undefined;
  try {
    const hangingUrl = `${await listen(hanging)}/api/`;
    const downPort = new URL(await listen(down)).port;
    slack = await startSlackStandIn({ botToken: BENCH.botToken });
    const env = (role: string, more: Record<string, string>) => ({
      ROLE: role,
      SLACK_BOT_TOKEN: BENCH.botToken,
      SLACK_SIGNING_SECRET: BENCH.signingSecret,
      SLACK_API_URL: slack?.apiUrl ?? '',
      CLOUD_API_URL: 'http://127.0.0.1:9/',
      CLOUD_API_KEY: 'bench-deadlines-key',
      SEAL_KEY: BENCH.sealKey,
      POLICY_FILE: policyFile,
      REDIS_URL: ctx.redisUrl,
      REDIS_PREFIX: ctx.newPrefix('deadlines'),
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      ...more,
    });
    const failedStart: Exit[] = [];
    const stopWhileStarting: Exit[] = [];
    const stopReady: Exit[] = [];
    // One bot at a time, so each is timed on a machine the others do not load.
    const timed = async (bot: ReturnType<typeof spawnBot>, signal?: NodeJS.Signals, after?: string) => {
      try {
        return await bot.exit(signal, after);
      } finally {
        bot.kill();
      }
    };
    for (let i = 0; i < runs; i++) {
      failedStart.push(await timed(spawnBot(env('web', { SLACK_API_URL: hangingUrl }), dir)));
      stopWhileStarting.push(
        await timed(
          spawnBot(env('web', { REDIS_URL: `redis://127.0.0.1:${downPort}` }), dir),
          'SIGTERM',
          'cloudops starting',
        ),
      );
      stopReady.push(await timed(spawnBot(env('worker', {}), dir), 'SIGTERM', 'cloudops ready'));
      ctx.log(`deadlines run ${i + 1}: ${JSON.stringify({ failedStart, stopWhileStarting, stopReady })}`);
    }
    const measured: [keyof typeof BUDGET_MS, string, Exit[], number][] = [
      ['failedStart', 'a start-up that cannot finish (Slack never answers): spawn → exit 1', failedStart, 1],
      ['stopWhileStarting', 'SIGTERM while the start-up waits for Redis → exit 0', stopWhileStarting, 0],
      ['stopReady', 'SIGTERM of a ready worker → exit 0', stopReady, 0],
    ];
    const spreads = new Map<string, Spread>(
      measured.map(([key, , exits]) => [key, spread(exits.map((e) => e.ms))]),
    );
    const checks: Check[] = measured.map(([key, what, exits, code]) => ({
      name: `deadlines: ${what.split(' → ')[0]} ends with exit ${code}`,
      ok: exits.every((e) => e.code === code),
      detail: `${key}: exit codes ${exits.map((e) => e.code).join(', ')}`,
    }));
    const targets: Check[] = measured.map(([key, what]) => {
      const s = spreads.get(key)!;
      return {
        name: `deadlines: ${what} within ${BUDGET_MS[key] / 1000} s`,
        ok: s.max < BUDGET_MS[key],
        detail: `median ${round(s.median)} ms, max ${round(s.max)} ms`,
        figure: s,
        limit: `< ${BUDGET_MS[key]} ms`,
        unit: ' ms',
      };
    });
    return {
      rows: measured.map(([key, what]) => ({
        scenario: `deadlines: ${what}`,
        target: 'cloudops',
        figures: {
          median_ms: round(spreads.get(key)!.median),
          max_ms: round(spreads.get(key)!.max),
          budget_ms: BUDGET_MS[key],
        },
      })),
      data: { runs, budgetsMs: BUDGET_MS, failedStart, stopWhileStarting, stopReady },
      checks,
      targets,
    };
  } finally {
    hanging.closeAllConnections();
    await new Promise<void>((resolve) => hanging.close(() => resolve()));
    await new Promise<void>((resolve) => down.close(() => resolve()));
    await slack?.close();
    await rm(dir, { recursive: true, force: true });
  }
}
