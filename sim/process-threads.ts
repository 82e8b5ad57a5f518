import { execFileSync } from 'node:child_process';

/**
 * The top frames of each thread of `pid`, read with gdb. A bot that printed its last line and never exited is
 * either waiting on something it opened or stuck in Node's own exit (docs/operations.md#a-bot-that-never-exits):
 * only the threads tell which, and the moment is gone once the test kills it.
 */
export function threadsOf(pid: number): string {
  let out: string;
  try {
    out = execFileSync('gdb', ['-p', String(pid), '-batch', '-ex', 'thread apply all bt 24'], {
      encoding: 'utf8',
      timeout: 60_000,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
  } catch (error) {
    return `(threads not read: ${(error as Error).message.split('\n')[0]})`;
  }
  // One line a thread: its name, then the functions it is in, innermost first, without the C library's waits.
  const threads: string[] = [];
  for (const line of out.split('\n')) {
    const thread = /^Thread \d+ .*"([^"]+)"\)?:?$/.exec(line);
    if (thread) threads.push(`${thread[1]}:`);
    const frame = /^#\d+\s+(?:0x[0-9a-f]+ in )?(.+?)(?: \(|$)/.exec(line);
    const name = frame?.[1] === '??' ? '(JIT code)' : frame?.[1];
    const last = threads[threads.length - 1];
    if (
      name &&
      last &&
      !/^(_+|do_futex|pthread_|start_thread|clone)/.test(name) &&
      !last.endsWith(` ${name} <`)
    )
      threads[threads.length - 1] = `${last} ${name.slice(0, 100)} <`;
  }
  return threads.map((t) => t.replace(/ <$/, '')).join('\n');
}
