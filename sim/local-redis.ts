import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { killGroup, spawnGroup } from './process-group.ts';

/** A redis-server this process started, in a temp dir of its own. */
export interface LocalRedis {
  url: string;
  port: number;
  dir: string;
  /** Stops the server (SIGTERM, then SIGKILL after 2 s); keeps the dir when `keepDir` is set. */
  stop(options?: { keepDir?: boolean }): Promise<void>;
  /** Kills the server at once, as a crash would. */
  kill(): Promise<void>;
  /** Starts it again on the same port and dir (for outage tests). */
  restart(): Promise<void>;
}

export class RedisNotInstalledError extends Error {
  override readonly name = 'RedisNotInstalledError';
  constructor() {
    super(
      'No Redis answers and redis-server is not on the PATH: install it (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis) or set REDIS_URL.',
    );
  }
}

/** Resolves true when something accepts a TCP connection and answers PING with +PONG. */
export async function redisAnswers(url: string, timeoutMs = 500): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('error', () => done(false));
    socket.connect(Number(port || 6379), hostname.replace(/^\[|\]$/g, '') || '127.0.0.1', () => {
      socket.write('PING\r\n');
    });
    socket.once('data', (data) => done(data.toString().startsWith('+PONG')));
  });
}

/** How long a redis-server may take to answer after its spawn: generous, the machine may be loaded. */
const STARTUP_WAIT_MS = 30_000;

/**
 * Asks the OS for a port free on loopback right now. Another process may take it before it is used: for a server
 * that can listen on 0, listen on 0 instead; use this for a port that nothing should answer on, or for Redis.
 */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** The `process_id` a Redis server reports in `INFO server`, or undefined when none answers. */
export async function redisPid(url: string, timeoutMs = 500): Promise<number | undefined> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = new Socket();
    let text = '';
    const done = (pid: number | undefined) => {
      socket.destroy();
      resolve(pid);
    };
    socket.setTimeout(timeoutMs, () => done(undefined));
    socket.once('error', () => done(undefined));
    socket.connect(Number(port || 6379), hostname.replace(/^\[|\]$/g, '') || '127.0.0.1', () => {
      socket.write('INFO server\r\n');
    });
    socket.on('data', (data) => {
      text += data.toString();
      const found = /process_id:(\d+)/.exec(text);
      if (found) done(Number(found[1]));
      else if (text.startsWith('-')) done(undefined);
    });
  });
}

/** How many ports a start tries when another process takes the free port first. */
const PORT_TRIES = 5;

/**
 * Starts `redis-server` on a free loopback port in a new temp dir, in a process group of its own.
 * `appendOnly` turns on AOF with fsync always, for tests that restart Redis and expect their queue back;
 * `extraArgs` are more `redis-server` options (e.g. `--replicaof`). Redis cannot listen on port 0 and say which
 * port it got, so a port found free may be taken before Redis binds it: then Redis exits and the start tries the
 * next free port (unless `port` was given). It only counts as started when the server answering is the one it
 * spawned (`INFO server` names its pid).
 */
export async function startLocalRedis(
  options: { appendOnly?: boolean; port?: number; extraArgs?: string[] } = {},
): Promise<LocalRedis> {
  let port = options.port ?? (await freePort());
  const dir = await mkdtemp(join(tmpdir(), 'cloudops-redis-'));
  let url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;

  const args = () => [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    options.appendOnly ? 'yes' : 'no',
    '--appendfsync',
    'always',
    '--maxmemory-policy',
    'noeviction',
    ...(options.extraArgs ?? []),
  ];

  /** Spawns once on `port`; resolves false when the server exited before answering (the port was taken). */
  const launchOnce = async (): Promise<boolean> => {
    const proc = await new Promise<ChildProcess>((resolve, reject) => {
      const spawned = spawnGroup('redis-server', args(), { stdio: 'ignore' });
      spawned.once('error', (error: NodeJS.ErrnoException) =>
        reject(error.code === 'ENOENT' ? new RedisNotInstalledError() : error),
      );
      spawned.once('spawn', () => resolve(spawned));
    });
    child = proc;
    const deadline = Date.now() + STARTUP_WAIT_MS;
    for (;;) {
      if (proc.exitCode !== null || proc.signalCode !== null) return false;
      if ((await redisPid(url, 500)) === proc.pid) return true;
      if (Date.now() > deadline) {
        killGroup(proc);
        throw new Error(`redis-server on port ${port} did not answer within ${STARTUP_WAIT_MS / 1000} s`);
      }
      await new Promise((r) => setTimeout(r, 25));
    }
  };

  const launch = async () => {
    for (let attempt = 1; ; attempt++) {
      if (await launchOnce()) return;
      if (options.port !== undefined || attempt >= PORT_TRIES) {
        throw new Error(`redis-server could not listen on port ${port} (exit ${child?.exitCode})`);
      }
      port = await freePort();
      url = `redis://127.0.0.1:${port}`;
    }
  };

  const waitExit = (proc: ChildProcess, ms: number) =>
    new Promise<void>((resolve) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
      const timer = setTimeout(() => {
        killGroup(proc, 'SIGKILL');
      }, ms);
      proc.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
    });

  try {
    await launch();
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    url,
    port,
    dir,
    async stop({ keepDir = false } = {}) {
      if (child) {
        killGroup(child, 'SIGTERM');
        await waitExit(child, 2000);
      }
      if (!keepDir) await rm(dir, { recursive: true, force: true });
    },
    async kill() {
      if (child) {
        killGroup(child, 'SIGKILL');
        await waitExit(child, 2000);
      }
    },
    async restart() {
      if (!(await launchOnce())) throw new Error(`redis-server could not listen on port ${port} again`);
    },
  };
}

/**
 * The Redis to use: `url` when it answers, else a local redis-server started for this process.
 * Throws {@link RedisNotInstalledError} when neither is possible.
 */
export async function ensureRedis(url: string): Promise<{ url: string; started?: LocalRedis }> {
  if (await redisAnswers(url)) return { url };
  const started = await startLocalRedis();
  return { url: started.url, started };
}
