import { type ChildProcess, type SpawnOptions, spawn } from 'node:child_process';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';

/**
 * Child processes in process groups of their own, so that a bot, a worker or a redis-server and everything it
 * started go together when the owner kills them, and none outlives the owner: the groups still running are
 * killed when the owner exits, and when SIGINT, SIGTERM or SIGHUP would end it (vitest interrupted, Ctrl-C).
 */

/** Set by the tests' global setup: every group started is appended here (`pgid starttime owner-pid command`). */
export const CHILD_LOG_ENV = 'CLOUDOPS_TEST_CHILD_LOG';

const live = new Set<ChildProcess>();
let hooked = false;

/** `spawn` with `detached: true` (a new process group led by the child), tracked until it exits. */
export function spawnGroup(
  command: string,
  args: readonly string[],
  options: SpawnOptions = {},
): ChildProcess {
  hookOwnerExit();
  const child = spawn(command, args, { ...options, detached: true });
  if (child.pid !== undefined) {
    live.add(child);
    child.once('exit', () => live.delete(child));
    const log = process.env[CHILD_LOG_ENV];
    // One line per group: an argument over several lines (a script given with -e) would otherwise add lines
    // that a reader takes for groups of their own.
    if (log)
      appendFileSync(
        log,
        `${child.pid} ${startTime(child.pid) ?? '-'} ${process.pid} ${[command, ...args].join(' ').replace(/\s+/g, ' ')}\n`,
      );
  }
  return child;
}

/** One group in the log at {@link CHILD_LOG_ENV}: its id (the leader's pid), the leader's start time, the owner, the command. */
export interface LoggedGroup {
  pgid: number;
  started: string;
  owner: number;
  command: string;
}

/**
 * The groups in a log of {@link CHILD_LOG_ENV}. Only lines that start with a group id count: whoever kills what the
 * log names must never get 0 (`kill(-0)` is the killer's own group) or a number that is not a pid.
 */
export function readGroupLog(path: string): LoggedGroup[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .map((line) => {
      const [pgid = '', started = '-', owner = '0', ...command] = line.split(' ');
      return { pgid: Number(pgid), started, owner: Number(owner), command: command.join(' ') };
    })
    .filter((group) => Number.isInteger(group.pgid) && group.pgid > 1);
}

/** Sends `signal` to the child's whole group (the child and what it started); false when none is left. */
export function killGroup(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): boolean {
  if (child.pid === undefined) return false;
  try {
    process.kill(-child.pid, signal);
    return true;
  } catch {
    return false;
  }
}

/**
 * Kills every group this process started that is still running (synchronous, so it works in 'exit'); returns how
 * many of their leaders were still running.
 */
export function killAllGroups(signal: NodeJS.Signals = 'SIGKILL'): number {
  let killed = 0;
  for (const child of live) {
    const running = child.exitCode === null && child.signalCode === null;
    if (killGroup(child, signal) && running) killed++;
  }
  live.clear();
  return killed;
}

/** The kernel's start time of `pid` (clock ticks since boot), to tell a reused pid apart; undefined off Linux. */
export function startTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command (which may hold spaces) in parentheses: state is field 3, starttime field 22.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

function hookOwnerExit(): void {
  if (hooked) return;
  hooked = true;
  process.once('exit', () => killAllGroups());
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    // With other listeners, they shut down (and the 'exit' hook kills what is left); alone, this one would keep
    // the process alive, so it kills the groups and ends the process by the signal, as it would have ended.
    const onSignal = () => {
      if (process.listenerCount(signal) > 1) return;
      killAllGroups();
      process.removeListener(signal, onSignal);
      process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }
}
