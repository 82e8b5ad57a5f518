import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

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
  /** Resolves with the port from the "cloudops ready" log line (LOG_LEVEL info or lower). */
  ready(timeoutMs?: number): Promise<number>;
  /** Sends `signal` (if still running) and returns the elapsed time at which it was sent. */
  kill(signal?: NodeJS.Signals): number;
}

export function spawnBot(env: Record<string, string>, cwd: string): BotProcess {
  const spawnedAt = performance.now();
  const child = spawn(process.execPath, START_ARGS, {
    cwd,
    // Many bots run at once: each its own metrics port unless the test names one.
    env: { PATH: process.env.PATH ?? '', METRICS_PORT: '0', ...env },
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
    async ready(timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const line = stdout.split('\n').find((l) => l.includes('"msg":"cloudops ready"'));
        if (line) return (JSON.parse(line) as { port: number }).port;
        if (child.exitCode !== null || Date.now() > deadline) {
          throw new Error(`bot not ready (exit ${child.exitCode}): ${stderr}${stdout.slice(-2000)}`);
        }
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    kill(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return elapsed();
    },
  };
}
