import { spawn } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CHILD_LOG_ENV, killGroup, readGroupLog, spawnGroup } from '../../sim/process-group.ts';
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

describe("the run's log of process groups", () => {
  it('logs a command over several lines on one line, and names only real groups', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cloudops-group-log-'));
    const log = join(dir, 'children.log');
    const before = process.env[CHILD_LOG_ENV];
    process.env[CHILD_LOG_ENV] = log;
    try {
      // A script given on the command line, as a test that runs `node -e` does.
      const child = spawnGroup('sh', ['-c', 'exit 0\n  # a second line\n'], { stdio: 'ignore' });
      await new Promise((resolve) => child.once('exit', resolve));
      const groups = readGroupLog(log);
      expect(groups.map((g) => g.pgid)).toEqual([child.pid]);
      expect(groups[0]?.command).toBe('sh -c exit 0 # a second line ');
      expect(readFileSync(log, 'utf8').trim().split('\n')).toHaveLength(1);
      // Lines that are not a group's never become one: kill(-0) would be the reader's own group, kill(-1) all.
      appendFileSync(log, '  const x = 1;\n0 - 1 sh\n1 - 1 init\nnot-a-pid - 1 sh\n');
      expect(readGroupLog(log).map((g) => g.pgid)).toEqual([child.pid]);
    } finally {
      if (before === undefined) delete process.env[CHILD_LOG_ENV];
      else process.env[CHILD_LOG_ENV] = before;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
