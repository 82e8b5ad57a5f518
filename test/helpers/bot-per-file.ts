import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { type Harness, type HarnessOptions, startHarness } from './harness.ts';

/**
 * One bot for the whole test file: started before its tests, closed after them, and (unless `slackProblems` is
 * false) checked after each test that the Slack stand-in saw nothing Slack would refuse. The harness it returns
 * answers once the bot has started, that is inside the file's tests and hooks.
 */
export function botPerFile(options: HarnessOptions = {}, checks: { slackProblems?: boolean } = {}): Harness {
  let started: Harness | undefined;
  beforeAll(async () => {
    started = await startHarness(options);
  });
  if (checks.slackProblems !== false)
    afterEach(() => {
      expect(started?.slack.problems).toEqual([]);
    });
  afterAll(async () => {
    await started?.close();
  });
  // A stand-in for the harness that is not there yet when the file's top level runs.
  return new Proxy({} as Harness, {
    get(_target, property) {
      if (!started) throw new Error('the bot starts in beforeAll: use it inside a test or a hook');
      const value: unknown = Reflect.get(started, property, started);
      return typeof value === 'function' ? value.bind(started) : value;
    },
  });
}
