/**
 * Does the bot always exit? Starts the compiled bot many times with a variable that stops start-up at once (an
 * app-level token that is a bot token, an unknown trace sampler) and counts the processes that never exit, for each
 * set of node flags given, interleaved in one run. Such a start ends in about a second; one still alive after
 * `--wait-ms` (2 minutes: a loaded machine makes a start slow, never endless) is counted and killed.
 *
 *   node --import tsx bench/exit-hang.ts [--runs 800] [--parallel 6] [--flags='--optimize-for-size|...'] [--stacks dir]
 *
 * (`--flags=` with the equals sign: node's argument parser takes a value that starts with a dash only that way.)
 *
 * Why it exists: on Node 24 a process can hang for ever inside process.exit. The main thread, shutting V8's
 * platform down, waits for its worker threads to drain, while a worker compiling a function in the background
 * (Maglev building its code object or its deoptimization data, Sparkplug a batch) waits for a garbage collection only
 * the main thread can run. Upstream: nodejs/node#54918, still open. `--optimize-for-size` makes it far likelier (a
 * young generation collected more often); the `--no-…` flags of `npm start` keep every such allocation on the main
 * thread. docs/operations.md#a-bot-that-never-exits has the figures and the choice.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { BENCH } from './lib/identity.ts';
import { START_NODE_ARGS } from './lib/start-args.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '800' },
    parallel: { type: 'string', default: '6' },
    flags: {
      type: 'string',
      default: `--optimize-for-size --no-maglev-build-code-on-background|${START_NODE_ARGS.join(' ')}`,
    },
    'wait-ms': { type: 'string', default: '120000' },
    // Where the threads of each process that never exited are written (gdb's `thread apply all bt`), when gdb is
    // installed: which threads wait on which is what tells one deadlock from another.
    stacks: { type: 'string' },
  },
});
const runs = Number(values.runs);
const parallel = Number(values.parallel);
const waitMs = Number(values['wait-ms']);
const variants = values.flags.split('|').map((flags) => flags.split(' ').filter(Boolean));

// Start-up fails on its first checks: no Redis, Slack or cloud API is reached, so nothing but the exit is timed.
const env = {
  PATH: process.env.PATH,
  SLACK_BOT_TOKEN: 'xoxb-exit-hang',
  SLACK_SIGNING_SECRET: 'exit-hang',
  SLACK_APP_TOKEN: 'xoxb-not-an-app-token',
  CLOUD_API_KEY: 'exit-hang',
  SEAL_KEY: BENCH.sealKey,
  OTEL_TRACES_SAMPLER: 'sometimes',
};

/** One start that should fail at once: true when the process was still alive after `waitMs` (then killed). */
function startOnce(flags: string[], cwd: string): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...flags, join(ROOT, 'dist/src/main.js')], {
      env,
      cwd,
      stdio: 'ignore',
    });
    const timer = setTimeout(async () => {
      if (values.stacks && child.pid !== undefined) await readThreads(child.pid, flags);
      child.kill('SIGKILL');
      resolve(true);
    }, waitMs);
    child.on('exit', () => {
      clearTimeout(timer);
      resolve(false);
    });
  });
}

/** Writes the threads of a process that never exited to the `--stacks` folder, and names the file. */
async function readThreads(pid: number, flags: string[]): Promise<void> {
  const threads = await new Promise<string>((resolve) =>
    execFile(
      'gdb',
      ['-p', String(pid), '-batch', '-ex', 'thread apply all bt'],
      { maxBuffer: 16 << 20 },
      (error, stdout, stderr) =>
        resolve(error && !stdout ? `gdb failed: ${error.message}\n${stderr}` : stdout),
    ),
  );
  const file = join(values.stacks!, `exit-hang-${pid}.txt`);
  await writeFile(file, `node flags: ${flags.join(' ') || "(Node's defaults)"}\n\n${threads}`);
  console.log(`never exited: pid ${pid} (${flags.join(' ') || "Node's defaults"}), threads in ${file}`);
}

const cwd = await mkdtemp(join(tmpdir(), 'cloudops-exit-hang-'));
const hung = variants.map(() => 0);
let next = 0;
// Interleaved: start i runs variant i % n, so load and noise fall on every variant alike.
async function lane(): Promise<void> {
  while (next < runs * variants.length) {
    const i = next++;
    if (await startOnce(variants[i % variants.length]!, cwd)) hung[i % variants.length]!++;
    // A long run says how far it is, so one stopped early still gives its counts.
    if ((i + 1) % 500 === 0) console.log(`${i + 1} starts, never exited so far: ${hung.join(' / ')}`);
  }
}
await Promise.all(Array.from({ length: parallel }, lane));
await rm(cwd, { recursive: true, force: true });
for (const [i, flags] of variants.entries()) {
  console.log(`${(flags.join(' ') || "(Node's defaults)").padEnd(60)} ${hung[i]} of ${runs} never exited`);
}
