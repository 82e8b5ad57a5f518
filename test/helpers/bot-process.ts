import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { killGroup, spawnGroup } from '../../sim/process-group.ts';
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
  /** Milliseconds since the spawn. */
  elapsed(): number;
  /**
   * Resolves with the port from the "cloudops ready" log line (LOG_LEVEL info or lower); rejects when the bot
   * exits first, or after `timeoutMs` (default: the tests' start-up wait, see test/helpers/startup.ts).
   */
  ready(timeoutMs?: number): Promise<number>;
  /** Sends `signal` to the bot's process group (if still running); returns the elapsed time at which it was sent. */
  kill(signal?: NodeJS.Signals): number;
}

/**
 * Spawns the bot in a process group of its own (killed with the test's process if the test does not end it).
 * Its start-up deadline is the tests' generous one unless `env` sets STARTUP_TIMEOUT_SECONDS.
 */
export function spawnBot(env: Record<string, string>, cwd: string): BotProcess {
  const spawnedAt = performance.now();
  const child = spawnGroup(process.execPath, START_ARGS, {
    cwd,
    // Many bots run at once: each its own metrics port unless the test names one.
    env: {
      PATH: process.env.PATH ?? '',
      METRICS_PORT: '0',
      STARTUP_TIMEOUT_SECONDS: String(STARTUP_TIMEOUT_SECONDS),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const elapsed = () => performance.now() - spawnedAt;
  const exited = new Promise<BotExit>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal, atMs: elapsed() })),
  );
  return {
    child,
    stdout: () => stdout,
    stderrLines: () => stderr.split('\n').filter((line) => line.trim() !== ''),
    exited,
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
  };
}
