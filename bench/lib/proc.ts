import { type ChildProcess, fork } from 'node:child_process';

/** A request to a bench child process: `op` names the handler, the rest are its arguments. */
export interface ProcOp {
  op: string;
  [key: string]: unknown;
}

export type ProcReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: string };

/** A child process of the bench (bot, bare Bolt, bare BullMQ), driven over IPC. */
export interface Proc {
  pid: number;
  call<T>(op: ProcOp, timeoutMs?: number): Promise<T>;
  /** CPU time (user + system) the child process has used so far, in ms: what figures per request are made of. */
  cpuMs(): Promise<number>;
  /** Asks the child to stop (`close` op), then kills it after `timeoutMs`. */
  close(timeoutMs?: number): Promise<void>;
}

/** No operation takes longer than this unless it says so; a longer one means the child is stuck. */
const OP_TIMEOUT_MS = 60_000;

/** Children still running; killed if the bench exits early, so none outlives it. */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** Forks `script` under tsx with an IPC channel; its stdout/stderr are inherited. */
export function forkProc(script: URL, name: string): Proc {
  // BENCH_PROFILE_BOT=<dir>: the bot's process writes a V8 CPU profile there (bench/profile.md).
  const profileDir = name.startsWith('bot') ? process.env.BENCH_PROFILE_BOT : undefined;
  const child: ChildProcess = fork(script, {
    execArgv: ['--import', 'tsx', ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [])],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  live.add(child);
  let nextId = 1;
  const waiting = new Map<number, (reply: ProcReply) => void>();
  child.on('message', (reply: ProcReply) => {
    waiting.get(reply.id)?.(reply);
    waiting.delete(reply.id);
  });
  child.on('exit', (code) => {
    live.delete(child);
    for (const w of waiting.values()) w({ id: 0, ok: false, error: `${name} exited (code ${code})` });
    waiting.clear();
  });
  const call = <T>(op: ProcOp, timeoutMs = OP_TIMEOUT_MS): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      if (child.exitCode !== null || child.signalCode !== null) {
        reject(new Error(`${name}: ${op.op}: the process has exited`));
        return;
      }
      const id = nextId++;
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error(`${name}: ${op.op} did not answer within ${timeoutMs} ms`));
      }, timeoutMs);
      waiting.set(id, (reply) => {
        clearTimeout(timer);
        if (reply.ok) resolve(reply.value as T);
        else reject(new Error(`${name}: ${op.op}: ${reply.error}`));
      });
      child.send({ ...op, id });
    });
  const pid = child.pid;
  if (pid === undefined) throw new Error(`could not start ${name}`);
  return {
    pid,
    call,
    cpuMs: () => call<number>({ op: 'cpu' }),
    async close(timeoutMs = 15_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      await call({ op: 'close' }, timeoutMs).catch(() => undefined);
      child.disconnect();
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * The child's side: answers each op with its handler; `cpu` (this process's CPU time in ms) and `close` (the
 * `onClose` handler, then exit) are built in. Leaving the IPC channel (the bench went away) ends the process.
 */
export function serveProc(
  handlers: Record<string, (op: ProcOp) => Promise<unknown> | unknown>,
  onClose: () => Promise<void> = async () => undefined,
): void {
  const all: Record<string, (op: ProcOp) => Promise<unknown> | unknown> = {
    ...handlers,
    cpu: () => {
      const used = process.cpuUsage();
      return (used.user + used.system) / 1000;
    },
    close: async () => {
      await onClose();
      setImmediate(() => process.exit(0));
      return null;
    },
  };
  process.on('message', (message: ProcOp & { id: number }) => {
    const handler = all[message.op];
    Promise.resolve()
      .then(() => {
        if (!handler) throw new Error(`unknown op ${message.op}`);
        return handler(message);
      })
      .then(
        (value) => process.send?.({ id: message.id, ok: true, value: value ?? null } satisfies ProcReply),
        (error: Error) =>
          process.send?.({
            id: message.id,
            ok: false,
            error: error.stack ?? error.message,
          } satisfies ProcReply),
      );
  });
  process.on('disconnect', () => process.exit(0));
}
