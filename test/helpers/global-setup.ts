import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureRedis, type LocalRedis } from '../../sim/local-redis.ts';
import { CHILD_LOG_ENV, type LoggedGroup, readGroupLog, startTime } from '../../sim/process-group.ts';
import { threadsOf } from '../../sim/process-threads.ts';

let started: LocalRedis | undefined;
/** The run's log of process groups (sim/process-group.ts); removed at the end unless someone else made it. */
let childLog: string | undefined;
let ownLog = false;

/** One Redis for the whole run: REDIS_URL or 127.0.0.1:6379 when it answers, else a redis-server of our own. */
export async function setup(project: { provide: (key: 'redisUrl', value: string) => void }) {
  // Every process group a test starts is logged, so the end of the run (or an interrupt) can find what is left.
  // A log given from outside (scripts/check-interrupt.mjs) is kept, so that caller can look at it afterwards.
  ownLog = !process.env[CHILD_LOG_ENV];
  childLog = process.env[CHILD_LOG_ENV] ?? join(tmpdir(), `cloudops-test-children-${process.pid}.log`);
  if (!existsSync(childLog)) writeFileSync(childLog, '');
  process.env[CHILD_LOG_ENV] = childLog;
  // vitest ends its workers with SIGKILL when interrupted, so they cannot clean up: this process does it.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => report(killLeftovers(true), `${signal} received`));
  }
  // The start-up, shutdown and CLI tests run dist/ as production does: build it first when stale, as `npm start` does.
  execFileSync(process.execPath, ['scripts/build.mjs', '--if-stale'], {
    cwd: fileURLToPath(new URL('../../', import.meta.url)),
    stdio: 'inherit',
  });
  const found = await ensureRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  started = found.started;
  project.provide('redisUrl', found.url);
}

export async function teardown() {
  await started?.stop();
  report(killLeftovers(false), 'at the end of the run');
  if (childLog && ownLog) rmSync(childLog, { force: true });
}

function loggedGroups(): LoggedGroup[] {
  return childLog ? readGroupLog(childLog) : [];
}

/** Whether the group still runs and is still ours (its pid not reused by an unrelated process since). */
function stillRunning(group: LoggedGroup): boolean {
  try {
    process.kill(-group.pgid, 0);
  } catch {
    return false;
  }
  // A pid that leads a live group cannot be given to a new process; a leader with another start time is not ours.
  const leaderStarted = startTime(group.pgid);
  return leaderStarted === undefined || group.started === '-' || leaderStarted === group.started;
}

/**
 * Kills (SIGKILL) every logged group still running; when `interrupted`, first the test workers that started them,
 * so none starts another meanwhile. Returns the commands of the groups it found running.
 */
function killLeftovers(interrupted: boolean): string[] {
  const groups = loggedGroups();
  if (interrupted) {
    for (const owner of new Set(groups.map((g) => g.owner))) {
      if (owner !== process.pid && parentOf(owner) === process.pid) signal(owner, 'SIGKILL');
    }
  }
  const left = groups.filter(stillRunning);
  // A bot still running at the end of the run outlived its test's stop: where its threads wait says why (an exit
  // hang, docs/operations.md#a-bot-that-never-exits), and is gone once it is killed. Not on an interrupt: that
  // must be quick.
  const described = left.map(
    (group) =>
      `${group.pgid}: ${group.command}` +
      (!interrupted && /dist\/src\/main\.js/.test(group.command)
        ? `\n    its threads:\n    ${threadsOf(group.pgid).split('\n').join('\n    ')}`
        : ''),
  );
  for (const group of left) signal(-group.pgid, 'SIGKILL');
  return described;
}

function report(left: string[], when: string): void {
  process.stderr.write(
    left.length === 0
      ? `cloudops tests: no process started by the tests is left (${when})\n`
      : `cloudops tests: ${left.length} process group(s) started by the tests were still running ${when}, killed:\n  ${left.join('\n  ')}\n`,
  );
}

function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Already gone.
  }
}

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
  }
}
