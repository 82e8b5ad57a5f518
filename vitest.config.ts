import { availableParallelism, loadavg } from 'node:os';
import { configDefaults, defineConfig } from 'vitest/config';

/** The benchmark's own tests: minutes long and about speed, so `npm run test:bench` runs them (vitest.bench.config.ts). */
export const BENCH_TESTS = ['test/integration/bench-*.test.ts'];

/** The e2e flows that run a second time with Slack reaching the bot over Socket Mode instead of signed HTTP. */
const SOCKET_MODE_FLOWS = [
  'test/e2e/slack-approvals.test.ts',
  'test/e2e/slack-commands.test.ts',
  'test/e2e/slack-expiry.test.ts',
  'test/e2e/slack-flow.test.ts',
  'test/e2e/slack-resize.test.ts',
  'test/e2e/pricing-commands.test.ts',
  'test/e2e/slack-lease.test.ts',
  'test/e2e/slack-message-refused.test.ts',
  // Slack's 3 s over the socket too, with the redelivery guard's Redis round trip in front of the handlers.
  'test/e2e/slack-slow-redis.test.ts',
  // The App Home and the workflow steps: events_api envelopes and clicks on a home over the socket.
  'test/e2e/slack-home.test.ts',
  'test/e2e/slack-steps.test.ts',
  // Leases and group approvers on the App Home: their clicks and the home's events over the socket.
  'test/e2e/slack-home-leases.test.ts',
  'test/e2e/slack-home-groups.test.ts',
  // Verified approvals: the link goes to the approver alone in Socket Mode too.
  'test/e2e/slack-verified-approvals.test.ts',
  // The verification page in a browser: in Socket Mode the health server on PORT serves it.
  'test/e2e/verify-page-browser.test.ts',
  // The verification page on the health server in Socket Mode, attacked as on Bolt's server in HTTP mode.
  'test/e2e/verify-hostile.test.ts',
];

/**
 * Test files at once. Most of a file's time is spent waiting (bots and redis-servers starting, Redis, timers): on
 * an idle 2-core machine two files at a time kept the cores about 40 % busy, and four finished the suite in two
 * thirds of the time. On a machine already busy (the last minute's load average at half the cores or more: another
 * suite, a build) more files at once only make each slower, so it stays at one per core. CLOUDOPS_TEST_WORKERS (or
 * vitest's --maxWorkers) sets the number.
 */
function testWorkers(): number {
  const fromEnv = Number(process.env.CLOUDOPS_TEST_WORKERS);
  if (Number.isInteger(fromEnv) && fromEnv > 0) return fromEnv;
  const cores = availableParallelism();
  // At most 8: every file shares one Redis and starts its own servers.
  return Math.min(8, loadavg()[0]! < cores / 2 ? 2 * cores : cores);
}

export default defineConfig({
  test: {
    // Generous: a test ends as soon as it passes, and a loaded machine (another suite beside this one) is slow.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // Quiet when green: what a test prints (sample messages, measured figures) is shown only when it fails.
    silent: 'passed-only',
    maxWorkers: testWorkers(),
    globalSetup: ['test/helpers/global-setup.ts'],
    setupFiles: ['test/helpers/per-file.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'all',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...BENCH_TESTS],
        },
      },
      {
        extends: true,
        test: {
          name: 'e2e-socket',
          include: SOCKET_MODE_FLOWS,
          env: { CLOUDOPS_TEST_SLACK_MODE: 'socket' },
        },
      },
    ],
  },
});
