import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { spawnNode } from '../helpers/bot-process.ts';

// The tests' stop of a bot process (SIGTERM, then its deadline): one that outlives the deadline has its threads read
// before it is killed, so a hang in Node's exit (docs/operations.md#a-bot-that-never-exits) leaves evidence instead
// of an orphan. A node process that ignores SIGTERM stands in for a bot stuck in its exit.
describe('BotProcess.stop', { timeout: 120_000 }, () => {
  it('a process still running past its deadline: its threads are printed, then it is killed', async () => {
    const stuck = spawnNode(
      [
        '-e',
        "process.on('SIGTERM', () => console.log('ignored')); setInterval(() => {}, 1000); console.log('up');",
      ],
      { PATH: process.env.PATH ?? '' },
      tmpdir(),
    );
    await expect.poll(() => stuck.stdout(), { timeout: 30_000 }).toContain('up');
    const error = await stuck.stop(1500).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(error?.message).toMatch(/^bot still running 1500 ms after it was expected to end/);
    expect(error?.message).toContain('stdout (end): up\nignored');
    const threads = error?.message.split('its threads:\n')[1] ?? '';
    // gdb attached: one line a thread, the main one in its event loop; without gdb it says why none were read.
    if (existsSync('/usr/bin/gdb')) expect(threads).toMatch(/^MainThread: .*uv_run/m);
    else expect(threads).toMatch(/^\(threads not read: /);
    expect(await stuck.exited).toMatchObject({ signal: 'SIGKILL' });
  });

  it('a process that ends on SIGTERM: its exit, and nothing read', async () => {
    const quick = spawnNode(
      ['-e', "process.on('SIGTERM', () => process.exit(0)); setInterval(() => {}, 1000); console.log('up');"],
      { PATH: process.env.PATH ?? '' },
      tmpdir(),
    );
    await expect.poll(() => quick.stdout(), { timeout: 30_000 }).toContain('up');
    expect(await quick.stop(20_000)).toMatchObject({ code: 0, signal: null });
  });
});
