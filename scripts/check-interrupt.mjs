// `npm run test:interrupt [-- <test file> [SIGINT|SIGTERM]]`: proves that an interrupted test run leaves no process
// behind. Starts `vitest run <file>` (default: a file that starts bots in their own processes), sends it SIGINT once
// a test has started a child process, waits for vitest to exit, then checks that no process the run started is
// left: no logged process group (bots, workers, redis-servers), nothing in vitest's own group (its workers), and no
// process whose command line names this checkout's dist/ or test/. Exits 1 and lists them when any is left.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../', import.meta.url));
const file = process.argv[2] ?? 'test/integration/ops-fail-fast.test.ts';
const signal = process.argv[3] ?? 'SIGINT';
const dir = mkdtempSync(join(tmpdir(), 'cloudops-interrupt-'));
const log = join(dir, 'children.log');
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
/** The log's lines that name a group (sim/process-group.ts readGroupLog): never 0 or 1, which kill(-pid) reads as all. */
const logged = () =>
  existsSync(log)
    ? readFileSync(log, 'utf8')
        .split('\n')
        .filter((line) => /^\d+ /.test(line) && Number(line.split(' ')[0]) > 1)
    : [];
/** Processes (pid and command line) whose command line names this checkout's dist/ or test/. */
const ofCheckout = () =>
  readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name) && Number(name) !== process.pid)
    .map((pid) => {
      try {
        return { pid, cmd: readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim() };
      } catch {
        return undefined;
      }
    })
    .filter((p) => p && (p.cmd.includes(join(root, 'dist/')) || p.cmd.includes(join(root, 'test/'))));

const vitest = spawn(process.execPath, [join(root, 'node_modules/vitest/vitest.mjs'), 'run', file], {
  cwd: root,
  env: { ...process.env, CLOUDOPS_TEST_CHILD_LOG: log },
  // Its own group, so that its workers can be looked for afterwards; output goes to this script's.
  detached: true,
  stdio: ['ignore', 'inherit', 'inherit'],
});
const exited = new Promise((resolve) => vitest.once('exit', (code, sig) => resolve({ code, sig })));

const deadline = Date.now() + 300_000;
// A test has started a child (a bot, a worker, a redis-server): logged by a test worker (not by vitest itself, whose
// global setup may start a Redis), or a bot seen in the process list (a checkout without the log).
const childStarted = () =>
  logged().some((line) => Number(line.split(' ')[2]) !== vitest.pid) ||
  ofCheckout().some((p) => p.cmd.includes(join(root, 'dist/src/main.js')));
while (!childStarted()) {
  if (Date.now() > deadline || vitest.exitCode !== null) {
    process.stderr.write(`check-interrupt: ${file} started no child process; nothing to interrupt\n`);
    if (alive(-vitest.pid)) process.kill(-vitest.pid, 'SIGKILL');
    process.exit(1);
  }
  await sleep(100);
}
// Let a test or two get going with its bots before the interrupt.
await sleep(1500);
const groups = logged().map((line) => Number(line.split(' ')[0]));
process.stdout.write(
  `check-interrupt: ${groups.length} process group(s) started; sending ${signal} to vitest\n`,
);
process.kill(vitest.pid, signal);
const end = await Promise.race([exited, sleep(60_000).then(() => undefined)]);
if (!end) process.stderr.write('check-interrupt: vitest still running 60 s after the interrupt\n');

// The last processes may take a moment to be reaped after vitest exits.
let left = [];
for (let tries = 0; tries < 50; tries++) {
  left = [
    ...logged()
      .filter((line) => alive(-Number(line.split(' ')[0])))
      .map((line) => `process group ${line}`),
    ...(alive(-vitest.pid) ? [`vitest's process group ${vitest.pid}`] : []),
    ...ofCheckout().map((p) => `pid ${p.pid}: ${p.cmd}`),
  ];
  if (left.length === 0) break;
  await sleep(100);
}
if (left.length > 0) {
  for (const pid of logged().map((line) => Number(line.split(' ')[0])))
    if (alive(-pid)) process.kill(-pid, 'SIGKILL');
  rmSync(dir, { recursive: true, force: true });
  process.stderr.write(`check-interrupt: FAILED, left after the interrupt:\n  ${left.join('\n  ')}\n`);
  process.exit(1);
}
rmSync(dir, { recursive: true, force: true });
process.stdout.write(
  `check-interrupt: ok: vitest ended (${end ? (end.sig ?? `exit ${end.code}`) : 'killed'}), no process of the run is left (${groups.length} group(s) started)\n`,
);
