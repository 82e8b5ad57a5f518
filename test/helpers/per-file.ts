import { afterAll, expect } from 'vitest';
import { killAllGroups } from '../../sim/process-group.ts';

// Runs after the file's own afterAll hooks (vitest runs them in reverse order): a child process a file started and
// did not end (a bot, a worker, a redis-server) is killed here, with its group, and named, instead of running on
// in the worker after the file.
afterAll(() => {
  const left = killAllGroups();
  if (left > 0) {
    process.stderr.write(
      `cloudops tests: ${expect.getState().testPath ?? 'a test file'} left ${left} process group(s) running; killed\n`,
    );
  }
});
