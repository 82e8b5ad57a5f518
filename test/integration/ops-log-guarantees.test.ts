import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadEnv } from '../../src/config/env.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { OPS, type OpsBot, startOpsBot } from '../helpers/ops-bot.ts';
import { testRedisUrl } from '../helpers/redis.ts';
import { TEST_SEAL_KEY } from '../helpers/seal.ts';
import { deliverEvent, functionExecuted, workflowUser } from '../helpers/slack-events.ts';
import { blockActionsPayload, interactionBody } from '../helpers/slack-request.ts';

// Two ways a secret could reach the logs that the literal and pattern scrubs would not catch (issue 24): an API key
// the logger was not told about (a rotated one, one in a config object), which only the redact paths remove, and a
// workflow step's token in a shape no pattern knows, which must never be written at all.

/** A key shaped like no token pattern, and not among the logger's literal secrets. */
const UNLISTED_KEY = `ck_${randomBytes(16).toString('hex')}`;

describe('the redact paths, for an API key the logger was not told about', () => {
  it('remove it wherever the bot keeps one: an apiKey field, nested, or the environment', () => {
    const lines: string[] = [];
    const logger = createLogger(
      { level: 'debug', secrets: [] },
      { write: (line: string) => void lines.push(line) },
    );
    const env = loadEnv({
      SLACK_BOT_TOKEN: 'xoxb-redact-paths-test',
      SLACK_SIGNING_SECRET: 'redact-paths-signing-secret',
      CLOUD_API_URL: 'http://127.0.0.1:9/',
      CLOUD_API_KEY: UNLISTED_KEY,
      SEAL_KEY: TEST_SEAL_KEY,
    });
    logger.info({ apiKey: UNLISTED_KEY }, 'a field');
    logger.info({ cloud: { baseUrl: env.CLOUD_API_URL, apiKey: UNLISTED_KEY } }, 'client options');
    logger.warn({ env }, 'the environment');
    logger.child({ apiKey: UNLISTED_KEY }).debug('a child logger’s bindings');

    expect(lines).toHaveLength(4);
    for (const line of lines) {
      expect(line, line).not.toContain(UNLISTED_KEY);
      expect(line).toContain('[redacted]');
    }
    // What is not secret stays readable.
    expect(lines[1]).toContain('http://127.0.0.1:9/');
  });
});

describe('a workflow step’s token, in a shape no pattern matches, through the running bot at LOG_LEVEL=debug', () => {
  let ops: OpsBot;
  beforeAll(async () => {
    ops = await startOpsBot({ redisUrl: testRedisUrl(), logLevel: 'debug' });
  });
  afterAll(async () => {
    await ops?.close();
  });

  it('is used to complete the step and never written to a log line', async () => {
    const { slack, sim } = ops;
    const token = `stepsecret-${randomBytes(12).toString('hex')}`;
    const target = {
      mode: 'http' as const,
      slack,
      eventsUrl: `${ops.url}/slack/events`,
      signingSecret: ops.secrets.signingSecret,
    };
    const run = slack.startFunction('request_vm_resize', {
      project: 'shop-prod',
      vm_id: 102,
      cores: 6,
      reason: 'step token test',
      channel: OPS.channel,
      requester: workflowUser(OPS.dev),
    });
    // Slack's tokens start xwfp- today, which the text scrub knows; this one must be kept out without that help.
    run.token = token;
    expect((await deliverEvent(target, functionExecuted(slack.teamId, run))).status).toBe(200);
    const posted = await slack.waitFor(
      () =>
        slack
          .messages(OPS.channel)
          .find((m) => m.thread_ts === undefined && /\(request [^)]+\)/.test(m.text ?? '')),
      30_000,
    );
    const requestId = /\(request ([^)]+)\)/.exec(posted.text ?? '')?.[1] ?? '';
    const approve = blockActionsPayload(
      { user: OPS.lead, channel: OPS.channel, teamId: OPS.team },
      {
        actionId: 'approve',
        value: requestId,
        blockId: `request:${requestId}`,
        triggerId: slack.triggerId(),
        responseUrl: slack.responseUrl({ channel: OPS.channel, user: OPS.lead, messageTs: posted.ts }),
        message: { ts: posted.ts, text: posted.text, blocks: posted.blocks },
      },
    );
    expect((await ops.send(interactionBody(approve))).status).toBe(200);
    // Completed by the run's own token: the stand-in accepts no other for it.
    const done = await slack.waitFor(
      () => (slack.execution(run.id)?.state === 'completed' ? run : undefined),
      30_000,
    );
    expect(done.outputs).toMatchObject({ request_id: requestId, state: 'succeeded' });
    expect(sim.applied.map((a) => a.vmid)).toEqual([102]);

    // Debug lines were written throughout (Bolt's included); none carries the token, in any field.
    expect(ops.logs.length).toBeGreaterThan(20);
    expect(ops.logs.filter((line) => line.includes(token))).toEqual([]);
    expect(ops.logs.filter((line) => line.includes(token.slice(-16)))).toEqual([]);
  });
});
