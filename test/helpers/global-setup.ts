import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ensureRedis, type LocalRedis } from '../../sim/local-redis.ts';

let started: LocalRedis | undefined;

/** One Redis for the whole run: REDIS_URL or 127.0.0.1:6379 when it answers, else a redis-server of our own. */
export async function setup(project: { provide: (key: 'redisUrl', value: string) => void }) {
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
}

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
  }
}
