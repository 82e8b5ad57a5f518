import { afterAll, describe, expect, it } from 'vitest';
import { loadEnv } from '../../src/config/env.ts';
import { type Running, startCloudops } from '../../src/main.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { CHANNELS, type Harness, startHarness, USERS } from '../helpers/harness.ts';
import { testRedisUrl } from '../helpers/redis.ts';
import { TEST_SEAL_KEY } from '../helpers/seal.ts';
import { runStep, workflowUser } from '../helpers/slack-events.ts';

let h: Harness | undefined;
let worker: Running | undefined;
afterAll(async () => {
  await worker?.stop();
  await h?.close();
});

describe('a workflow step across a restart', () => {
  it('is completed by a worker started after the bot that took the step stopped', async () => {
    // The web part alone takes the step and the approval; nothing runs the job yet.
    h = await startHarness({ role: 'web' });
    const run = await runStep(h, 'request_vm_resize', {
      project: 'shop-prod',
      vm_id: 102,
      cores: 6,
      channel: CHANNELS.prod,
      requester: workflowUser(USERS.dev),
    });
    const request = await h.waitForRequest((await h.nextRequest()).id, (r) => r.state === 'pending');
    await h.click('approve', request.id, USERS.lead);
    await h.waitForRequest(request.id, (r) => r.state === 'queued');
    await h.bot.stop();
    expect(h.slack.execution(run.id)?.state).toBe('running');

    // A new process of the bot (its worker part) with nothing in memory: the token and the job are in Redis.
    const logs: string[] = [];
    worker = await startCloudops(
      loadEnv({
        SLACK_BOT_TOKEN: h.slack.botToken,
        SLACK_API_URL: h.slack.apiUrl,
        CLOUD_API_URL: h.sim.url,
        CLOUD_API_KEY: h.sim.apiKey,
        SEAL_KEY: TEST_SEAL_KEY,
        REDIS_URL: testRedisUrl(),
        REDIS_PREFIX: h.prefix,
        PORT: '0',
        METRICS_PORT: '0',
        ROLE: 'worker',
        LOG_LEVEL: 'debug',
      }),
      h.policy,
      {
        now: h.clock.now,
        logger: createLogger(
          { level: 'debug', secrets: [h.slack.botToken] },
          { write: (l: string) => void logs.push(l) },
        ),
        shutdownTimeoutMs: 5000,
      },
    );
    const done = await h.slack.waitFor(() => {
      const now = h?.slack.execution(run.id);
      return now && now.state !== 'running' ? now : undefined;
    }, 30_000);
    expect(done).toMatchObject({
      state: 'completed',
      outputs: { request_id: request.id, state: 'succeeded' },
    });
    // Even at debug level, the step's token is in no log line.
    expect([...logs, ...h.logs].join('\n')).not.toContain(run.token);
    expect(h.slack.problems).toEqual([]);
  });
});
