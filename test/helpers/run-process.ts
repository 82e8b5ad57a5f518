import type { SpawnOptions } from 'node:child_process';
import { killGroup, spawnGroup } from '../../sim/process-group.ts';

/** How a process run to its end ended, and what it wrote. */
export interface Ran {
  /** The exit code; null when it ended by a signal (or was killed after `timeoutMs`). */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `command` to its end in a process group of its own (see sim/process-group.ts): what it starts goes with
 * it, and nothing outlives the test. After `timeoutMs` (if given) the group is killed and `code` is null.
 */
export function runProcess(
  command: string,
  args: readonly string[],
  options: Pick<SpawnOptions, 'cwd' | 'env'> & { timeoutMs?: number } = {},
): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawnGroup(command, args, {
      cwd: options.cwd,
      env: options.env,
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
    const timer =
      options.timeoutMs === undefined ? undefined : setTimeout(() => killGroup(child), options.timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}
