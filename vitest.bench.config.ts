import { defineConfig } from 'vitest/config';
import { BENCH_TESTS } from './vitest.config.ts';

/** `npm run test:bench`: the benchmark's own tests, out of `npm test` because the quick bench alone takes minutes. */
export default defineConfig({
  test: {
    include: BENCH_TESTS,
    testTimeout: 60_000,
    hookTimeout: 300_000,
    // One at a time: the quick bench measures, and a second file beside it would load the cores it measures on.
    maxWorkers: 1,
    globalSetup: ['test/helpers/global-setup.ts'],
    setupFiles: ['test/helpers/per-file.ts'],
  },
});
