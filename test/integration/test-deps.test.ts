import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, redisAnswers } from '../../sim/local-redis.ts';
import { CHROMIUM } from '../helpers/verify-browser.ts';

// npm test's pretest, run as a child process with a PATH of this test's own: what it finds, and what it says when
// it cannot install (no apt-get on that PATH), without installing anything on this machine.
const script = fileURLToPath(new URL('../../scripts/test-deps.mjs', import.meta.url));
let bin: string;
beforeAll(async () => {
  bin = await mkdtemp(join(tmpdir(), 'cloudops-test-deps-'));
});
afterAll(async () => {
  if (bin) await rm(bin, { recursive: true, force: true });
});

const run = (env: Record<string, string>) =>
  spawnSync(process.execPath, [script], { encoding: 'utf8', env: { PATH: bin, ...env } });

describe('scripts/test-deps.mjs (npm test’s pretest)', () => {
  it('with a browser and redis-server on the PATH: nothing to do, exit 0, silent', async () => {
    const which = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).stdout.trim();
    await symlink(which, join(bin, 'redis-server'));
    try {
      const result = run({ CHROMIUM_PATH: CHROMIUM });
      expect(result.status, result.stderr).toBe(0);
      expect(result.stdout + result.stderr).toBe('');
    } finally {
      await rm(join(bin, 'redis-server'));
    }
  });

  it('no redis-server and no Redis answering, nothing to install with: the exact command, exit 1', async () => {
    const result = run({ CHROMIUM_PATH: CHROMIUM, REDIS_URL: `redis://127.0.0.1:${await freePort()}` });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('npm test needs redis-server, which this machine lacks.');
    expect(result.stderr).toContain("sudo sh -c 'apt-get update && apt-get install -y redis-server'");
  });

  it('a Redis asking for a password and no redis-server: the suite could not use it, so the command, exit 1', async () => {
    // The suite's global setup pings without a password: a Redis answering NOAUTH is not one it runs on, and it
    // would start a redis-server of its own, which is missing here.
    const port = await freePort();
    const which = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).stdout.trim();
    const redis = spawn(
      which,
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--requirepass', 'pw-3c1e'],
      {
        stdio: 'ignore',
      },
    );
    try {
      const url = `redis://127.0.0.1:${port}`;
      // It is up once it answers, with NOAUTH.
      const cli = which.replace(/redis-server$/, 'redis-cli');
      await expect
        .poll(() => spawnSync(cli, ['-p', String(port), 'ping'], { encoding: 'utf8' }).stdout, {
          timeout: 10_000,
        })
        .toMatch(/NOAUTH/);
      expect(await redisAnswers(url)).toBe(false);
      const result = run({ CHROMIUM_PATH: CHROMIUM, REDIS_URL: url });
      expect(result.status).toBe(1);
      expect(result.stderr).toContain('npm test needs redis-server, which this machine lacks.');
      expect(result.stderr).toContain(
        `(the Redis at 127.0.0.1:${port} asks for a password: the tests need one that answers without)`,
      );
    } finally {
      redis.kill('SIGTERM');
    }
  });

  it('a CHROMIUM_PATH that does not exist: said, exit 1', () => {
    const result = run({ CHROMIUM_PATH: join(bin, 'no-such-chromium') });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('CHROMIUM_PATH=');
  });
});
