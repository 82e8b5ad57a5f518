import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { killGroup, spawnGroup } from '../../sim/process-group.ts';
import { WAIT_MS } from '../helpers/startup.ts';

// Nothing a test starts may outlive it: a child runs in a process group of its own, which goes as one, and the
// groups a process started go when it exits or a signal ends it (the suite's interrupt is npm run test:interrupt).
const OWNER = fileURLToPath(new URL('../fixtures/group-owner.ts', import.meta.url));

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Resolves once `pid` is gone (reaped), or rejects after the tests' wait. */
async function gone(pid: number): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  while (alive(pid)) {
    if (Date.now() > deadline) throw new Error(`process ${pid} still running`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The first line a child writes to stdout, as a number (a pid). */
function firstPid(child: ReturnType<typeof spawn>): Promise<number> {
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('\n')) resolve(Number(out.split('\n')[0]));
    });
    child.once('exit', (code) =>
      out.includes('\n') ? undefined : reject(new Error(`exited ${code}: ${out}`)),
    );
  });
}

describe('process groups (sim/process-group.ts)', () => {
  it('killGroup ends the child and what it started', async () => {
    const shell = spawnGroup('sh', ['-c', 'sleep 1000 & echo $!; wait'], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const grandchild = await firstPid(shell);
    expect(alive(grandchild)).toBe(true);
    const exited = new Promise((resolve) => shell.once('exit', resolve));
    expect(killGroup(shell)).toBe(true);
    await exited;
    await gone(grandchild);
  });

  it('a process that exits takes the groups it started with it', async () => {
    const owner = spawn(process.execPath, ['--import', 'tsx', OWNER, 'exit'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const sleeper = await firstPid(owner);
    await gone(sleeper);
  });

  it.each(['SIGTERM', 'SIGINT'] as const)(
    '%s to a process with no handler of its own kills its groups and still ends it by the signal',
    async (signal) => {
      const owner = spawn(process.execPath, ['--import', 'tsx', OWNER, 'wait'], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const sleeper = await firstPid(owner);
      const exited = new Promise<NodeJS.Signals | null>((resolve) =>
        owner.once('exit', (_code, s) => resolve(s)),
      );
      owner.kill(signal);
      expect(await exited).toBe(signal);
      await gone(sleeper);
    },
  );
});
