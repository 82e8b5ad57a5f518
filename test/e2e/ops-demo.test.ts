import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../sim/local-redis.ts';
import { testRedisUrl } from '../helpers/redis.ts';
import { runProcess } from '../helpers/run-process.ts';

// `npm run demo` as a newcomer runs it: a child process, no Slack or cloud configuration at all.
const repo = fileURLToPath(new URL('../../', import.meta.url));

function demo(
  env: Record<string, string>,
  args: string[] = [],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runProcess(process.execPath, ['--import', 'tsx', 'demo/main.ts', ...args], {
    cwd: repo,
    env,
    timeoutMs: 60_000,
  });
}

describe('npm run demo', { timeout: 120_000 }, () => {
  it('plays the whole session on the simulators, prints it as Slack shows it, and exits 0', async () => {
    const run = await demo({ PATH: process.env.PATH ?? '', REDIS_URL: testRedisUrl() });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const out = run.stdout;
    // Each step, as a person reads it.
    expect(out).toContain('alice › /cloud clusters');
    expect(out).toMatch(/zone-1 · Frankfurt/);
    expect(out).toMatch(/✗ OS disk \(GB\): The OS disk cannot shrink/);
    expect(out).toMatch(/cloudops in #shop-prod:\n {4}RESIZE SHOP-PROD \/ VM 102/);
    expect(out).toContain('You cannot approve your own request');
    expect(out).toMatch(/↳ cloudops, in the thread:\n\s+Approved by @bob/);
    expect(out).toMatch(/✅ Done: /);
    expect(out).toMatch(/Task id: `[^`]+`/);
    expect(out).toContain('PRICING DIGEST');
    expect(out).toMatch(/✔ Demo complete: 6 steps did what they should\. 2 API changes/);
    // Plain text for people: no raw Block Kit, user ids or secrets.
    expect(out).not.toMatch(/"type":|<@U|xoxb-|Bearer /);
  });

  it('--socket: the same session with Slack reaching the bot over Socket Mode, and a refreshed link', async () => {
    const run = await demo({ PATH: process.env.PATH ?? '', REDIS_URL: testRedisUrl() }, ['--socket']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const out = run.stdout;
    expect(out).toContain('(Socket Mode)');
    expect(out).toContain('bot connected to the Slack stand-in over Socket Mode (no public URL)');
    expect(out).toMatch(/✗ OS disk \(GB\): The OS disk cannot shrink/);
    expect(out).toMatch(/↳ cloudops, in the thread:\n\s+Approved by @bob/);
    expect(out).toMatch(/Task id: `[^`]+`/);
    expect(out).toContain('PRICING DIGEST');
    expect(out).toMatch(/\(the link was refreshed: connection 2, after \d+ ms\)/);
    expect(out).toMatch(/✔ Demo complete: 7 steps did what they should\. 2 API changes/);
    // The Socket Mode URL's ticket (`?ticket=`) never shows; the help's `[ticket=KEY]` (change tickets) may.
    expect(out).not.toMatch(/"type":|<@U|xoxb-|xapp-|[?&]ticket=|Bearer /);
  });

  it('says in one line what to install when no Redis answers and redis-server is not on the PATH', async () => {
    const empty = await mkdtemp(join(tmpdir(), 'cloudops-nopath-'));
    try {
      const run = await demo({ PATH: empty, REDIS_URL: `redis://127.0.0.1:${await freePort()}` });
      expect(run.code).toBe(1);
      const lines = run.stderr.split('\n').filter((line) => line.trim() !== '');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(
        /^cloudops demo: No Redis answers and redis-server is not on the PATH: install it/,
      );
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });
});
