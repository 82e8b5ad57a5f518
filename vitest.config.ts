import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Integration and e2e tests start servers and Redis clients; two cores are shared between files.
    maxWorkers: 2,
    globalSetup: ['test/helpers/global-setup.ts'],
  },
});
