import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { killGroup, spawnGroup } from '../../sim/process-group.ts';
import { threadsOf } from '../../sim/process-threads.ts';
import { SHUTDOWN_DEADLINE_MS } from '../../src/main.ts';
import { STARTUP_TIMEOUT_SECONDS, STARTUP_WAIT_MS } from './startup.ts';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const pkg = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { scripts: { start: string } };

/**
 * `npm start`'s node arguments with the entry made absolute: the compiled dist/ that production runs (the global
 * setup builds it when stale, as npm start's prestart does). Children run in a temp dir, not in the clone.
 */
export const START_ARGS = pkg.scripts.start
  .split(' ')
  .slice(1)
  .map((arg) => (arg.endsWith('.js') ? join(repo, arg) : arg));

/** How a bot process ended, and when (ms after it was spawned). */
export interface BotExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  atMs: number;
}

/** The bot as an operator runs it: its own process, only the environment given (plus PATH). */
export interface BotProcess {
  child: ChildProcess;
  stdout(): string;
  /** The non-empty lines written to stderr so far. */
  stderrLines(): string[];
  exited: Promise<BotExit>;
  /**
   * {@link exited}, for a bot expected to end by itself or on a signal: rejects when it is still running after
   * `timeoutMs` (default: the tests' start-up wait), naming its last output and where each thread waits (read before
   * it is killed). A test awaiting `exited` alone would wait for its own timeout and say nothing of why.
   */
  ends(timeoutMs?: number): Promise<BotExit>;
  /** Milliseconds since the spawn. */
  elapsed(): number;
  /**
   * Resolves with the port from the "cloudops ready" log line (LOG_LEVEL info or lower); rejects when the bot
   * exits first, or after `timeoutMs` (default: the tests' start-up wait, see test/helpers/startup.ts).
   */
  ready(timeoutMs?: number): Promise<number>;
  /** Sends `signal` to the bot's process group (if still running); returns the elapsed time at which it was sent. */
  kill(signal?: NodeJS.Signals): number;
  /**
   * The stop an operator's SIGTERM makes: SIGTERM to the group, then {@link ends} within `deadlineMs` (default: the
   * bot's own shutdown deadline and a margin). A bot that outlives it has its threads printed (on this process's
   * stderr too, so a test that catches the error still shows them) before it is killed.
   */
  stop(deadlineMs?: number): Promise<BotExit>;
}

/** How long past its own shutdown deadline a stopping bot may take (a loaded machine) before it is a hang. */
export const STOP_MARGIN_MS = 10_000;

/**
 * Spawns the bot in a process group of its own (killed with the test's process if the test does not end it).
 * Its start-up deadline is the tests' generous one unless `env` sets STARTUP_TIMEOUT_SECONDS.
 */
export function spawnBot(env: Record<string, string>, cwd: string): BotProcess {
  // Many bots run at once: each its own metrics port unless the test names one.
  return spawnNode(
    START_ARGS,
    {
      PATH: process.env.PATH ?? '',
      METRICS_PORT: '0',
      STARTUP_TIMEOUT_SECONDS: String(STARTUP_TIMEOUT_SECONDS),
      ...env,
    },
    cwd,
  );
}

/** `node <args>` in a process group of its own with exactly `env`, watched as {@link BotProcess} describes. */
export function spawnNode(args: readonly string[], env: Record<string, string>, cwd: string): BotProcess {
  const spawnedAt = performance.now();
  const child = spawnGroup(process.execPath, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const elapsed = () => performance.now() - spawnedAt;
  // Resolved once stdout and stderr have ended too ('close'), or 2 s after 'exit' if they have not (a pipe still held
  // open must not hold the test): on a loaded machine a bot's last stderr line can reach this process after its
  // 'exit', and a test reading the output at 'exit' found none. The time is the exit's.
  const exited = new Promise<BotExit>((resolve) => {
    child.once('exit', (code, signal) => {
      const ended = { code, signal, atMs: elapsed() };
      const grace = setTimeout(() => resolve(ended), 2_000);
      child.once('close', () => {
        clearTimeout(grace);
        resolve(ended);
      });
    });
  });
  const threads = () => (child.pid === undefined ? '' : threadsOf(child.pid));
  const bot: BotProcess = {
    child,
    stdout: () => stdout,
    stderrLines: () => stderr.split('\n').filter((line) => line.trim() !== ''),
    exited,
    async ends(timeoutMs = STARTUP_WAIT_MS) {
      let timer: NodeJS.Timeout | undefined;
      const exit = await Promise.race([
        exited,
        new Promise<undefined>((resolve) => {
          timer = setTimeout(() => resolve(undefined), timeoutMs);
        }),
      ]);
      clearTimeout(timer);
      if (exit) return exit;
      const where = threads();
      if (child.exitCode === null && child.signalCode === null) killGroup(child, 'SIGKILL');
      process.stderr.write(
        `bot pid ${child.pid} still running ${timeoutMs} ms after it was expected to end; its threads:\n${where}\n`,
      );
      throw new Error(
        `bot still running ${timeoutMs} ms after it was expected to end\n` +
          `stderr: ${stderr.slice(-2000)}\nstdout (end): ${stdout.slice(-2000)}\nits threads:\n${where}`,
      );
    },
    elapsed,
    ready(timeoutMs = STARTUP_WAIT_MS) {
      const readyPort = () => {
        const line = stdout.split('\n').find((l) => l.includes('"msg":"cloudops ready"'));
        return line ? (JSON.parse(line) as { port: number }).port : undefined;
      };
      return new Promise<number>((resolve, reject) => {
        const done = () => {
          clearTimeout(timer);
          child.stdout?.off('data', onData);
          child.off('exit', onExit);
        };
        const fail = (why: string) => {
          done();
          reject(new Error(`bot not ready (${why}): ${stderr}${stdout.slice(-2000)}`));
        };
        const onData = () => {
          const port = readyPort();
          if (port !== undefined) {
            done();
            resolve(port);
          }
        };
        // The ready line may be in the last chunk before the exit: look once more before giving up.
        const onExit = () => (readyPort() === undefined ? fail(`exit ${child.exitCode}`) : onData());
        const timer = setTimeout(() => fail(`not within ${timeoutMs} ms`), timeoutMs);
        child.stdout?.on('data', onData);
        child.once('exit', onExit);
        if (child.exitCode !== null || child.signalCode !== null) onExit();
        else onData();
      });
    },
    kill(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) killGroup(child, signal);
      return elapsed();
    },
    stop(deadlineMs = SHUTDOWN_DEADLINE_MS + STOP_MARGIN_MS) {
      bot.kill('SIGTERM');
      return bot.ends(deadlineMs);
    },
  };
  return bot;
}
