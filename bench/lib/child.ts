import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { request } from 'undici';

/** A Node process started by the bench, ready when `GET readyUrl` answered 200. */
export interface ReadyChild {
  pid: number;
  /** Spawn → first 200 from the readiness URL. */
  coldStartMs: number;
  /** Resident memory now (VmRSS), in MB. */
  rssMb(): Promise<number>;
  /** CPU time the process has used since it started (user + system, from /proc in clock ticks of 10 ms), ms. */
  cpuMs(): Promise<number>;
  /** SIGTERM, then SIGKILL after `timeoutMs`; resolves with how it ended. */
  stop(timeoutMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>;
}

/** How often readiness is asked while a child starts. */
const READY_POLL_MS = 20;

/** Children still running; killed if the bench exits early (hard time limit, crash), so none outlives it. */
const live = new Set<ReturnType<typeof spawn>>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/**
 * Spawns `node <nodeArgs> <script>` (default `--import tsx`) with `env`, output appended to `logFile`, and waits for
 * `readyUrl` to answer 200.
 */
export async function spawnReady(options: {
  script: string;
  /** Node's arguments before the script; `[]` runs compiled JavaScript. */
  nodeArgs?: string[];
  env: Record<string, string>;
  readyUrl: string;
  timeoutMs: number;
  logFile: string;
  cwd: string;
}): Promise<ReadyChild> {
  const log = createWriteStream(options.logFile, { flags: 'a' });
  const started = performance.now();
  const child = spawn(process.execPath, [...(options.nodeArgs ?? ['--import', 'tsx']), options.script], {
    cwd: options.cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  child.once('exit', () => live.delete(child));
  child.stdout.pipe(log, { end: false });
  child.stderr.pipe(log, { end: false });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  let exitedEarly: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  void exited.then((e) => {
    exitedEarly = e;
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error(`could not start ${options.script}`);

  const deadline = started + options.timeoutMs;
  for (;;) {
    if (exitedEarly)
      throw new Error(
        `${options.script} exited before it was ready (code ${exitedEarly.code}); see ${options.logFile}`,
      );
    const ok = await request(options.readyUrl, { headersTimeout: 1000, bodyTimeout: 1000 }).then(
      async (r) => {
        await r.body.dump();
        return r.statusCode === 200;
      },
      () => false,
    );
    if (ok) break;
    if (performance.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(
        `${options.script} was not ready within ${options.timeoutMs} ms; see ${options.logFile}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, READY_POLL_MS));
  }
  const coldStartMs = performance.now() - started;

  return {
    pid,
    coldStartMs,
    async rssMb() {
      const status = await readFile(`/proc/${pid}/status`, 'utf8');
      const kb = Number(/^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1]);
      if (!Number.isFinite(kb)) throw new Error(`no VmRSS for pid ${pid}`);
      return kb / 1024;
    },
    async cpuMs() {
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return (Number(fields[11]) + Number(fields[12])) * 10;
    },
    async stop(timeoutMs = 15_000) {
      const stopAt = performance.now();
      if (!exitedEarly) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      const end = await exited;
      clearTimeout(timer);
      log.end();
      return { ...end, ms: performance.now() - stopAt };
    },
  };
}
