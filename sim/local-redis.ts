import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

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

/** Asks the OS for a free TCP port on loopback. */
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

/**
 * Starts `redis-server` on a free loopback port in a new temp dir.
 * `appendOnly` turns on AOF with fsync always, for tests that restart Redis and expect their queue back;
 * `extraArgs` are more `redis-server` options (e.g. `--replicaof`).
 */
export async function startLocalRedis(
  options: { appendOnly?: boolean; port?: number; extraArgs?: string[] } = {},
): Promise<LocalRedis> {
  const port = options.port ?? (await freePort());
  const dir = await mkdtemp(join(tmpdir(), 'cloudops-redis-'));
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;

  const args = [
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

  const launch = async () => {
    child = await new Promise<ChildProcess>((resolve, reject) => {
      const proc = spawn('redis-server', args, { stdio: 'ignore' });
      proc.once('error', (error: NodeJS.ErrnoException) =>
        reject(error.code === 'ENOENT' ? new RedisNotInstalledError() : error),
      );
      proc.once('spawn', () => resolve(proc));
    });
    const deadline = Date.now() + 5000;
    while (!(await redisAnswers(url, 200))) {
      if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer within 5 s`);
      await new Promise((r) => setTimeout(r, 25));
    }
  };

  const waitExit = (proc: ChildProcess, ms: number) =>
    new Promise<void>((resolve) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
      const timer = setTimeout(() => {
        proc.kill('SIGKILL');
      }, ms);
      proc.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
    });

  await launch();
  return {
    url,
    port,
    dir,
    async stop({ keepDir = false } = {}) {
      if (child) {
        child.kill('SIGTERM');
        await waitExit(child, 2000);
      }
      if (!keepDir) await rm(dir, { recursive: true, force: true });
    },
    async kill() {
      if (child) {
        child.kill('SIGKILL');
        await waitExit(child, 2000);
      }
    },
    async restart() {
      await launch();
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
