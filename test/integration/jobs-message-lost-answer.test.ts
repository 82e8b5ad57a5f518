import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observability/logger.ts';
import { SlackApi } from '../../src/slack-api/client.ts';
import { type JobsEnv, resizeOf, startJobsEnv, until } from './jobs-env.ts';

// The request message when Slack keeps it but its answer to chat.postMessage never reaches the worker (lost, or slower
// than the client's deadline, as behind a proxy with an idle timeout): the retried post must not make a second copy,
// which would stay "Waiting for approval" with live buttons beside the real one.

let env: JobsEnv | undefined;
let slack: SlackApi | undefined;

afterEach(async () => {
  if (env) expect(env.slack.problems).toEqual([]);
  await slack?.close();
  await env?.close();
  env = undefined;
  slack = undefined;
});

/** The request's top-level messages in its channel. */
const copies = (current: JobsEnv, id: string) =>
  current.slack.messages('C0PROD').filter((m) => !m.thread_ts && (m.text ?? '').includes(id));

describe('the request message when Slack’s answer to chat.postMessage is late or lost', () => {
  it('the retried post finds the first copy by its metadata, adopts it and posts no second one', async () => {
    env = await startJobsEnv({ name: 'jobs-post-lost' });
    const current = env;
    // The first post is kept by Slack, answered 3 s late; the worker gives up on it after 500 ms.
    current.slack.holdAnswer('chat.postMessage', 3_000);
    slack = new SlackApi({ apiUrl: current.slack.apiUrl, token: current.slack.botToken, timeoutMs: 500 });
    current.startWorkers({ slack });
    const request = await current.queueRequest(resizeOf(current, 102, { cores: 6 }));
    await current.waitForState(request.id, ['succeeded']);
    await until(() => copies(current, request.id).some((m) => m.edits > 0), 'the message updated');
    await new Promise((r) => setTimeout(r, 3_500));
    const [only, ...more] = copies(current, request.id);
    expect(more).toEqual([]);
    expect(only?.metadata).toEqual({
      event_type: 'cloudops_request',
      event_payload: { request_id: request.id },
    });
    expect((await current.store.get(request.id))?.messageTs).toBe(only?.ts);
    // The one copy shows the run's outcome, with no buttons left.
    expect(only?.text).not.toMatch(/Waiting for approval/i);
    expect(JSON.stringify(only?.blocks)).not.toContain('"actions"');
    expect(current.slack.callsOf('conversations.history').length).toBeGreaterThanOrEqual(1);
    expect(current.sim.applied).toHaveLength(1);
  });

  it('without the history scope the message is posted again and the log says it may repeat', async () => {
    env = await startJobsEnv({ name: 'jobs-post-lost-scope' });
    const current = env;
    const logs: string[] = [];
    const logger = createLogger({ level: 'warn' }, { write: (line: string) => void logs.push(line) });
    current.slack.holdAnswer('chat.postMessage', 3_000);
    current.slack.failNext('conversations.history', { error: 'missing_scope' });
    slack = new SlackApi({ apiUrl: current.slack.apiUrl, token: current.slack.botToken, timeoutMs: 500 });
    current.startWorkers({ slack, logger });
    const request = await current.queueRequest(resizeOf(current, 102, { cores: 6 }));
    await current.waitForState(request.id, ['succeeded']);
    await until(() => copies(current, request.id).length === 2, 'the second copy');
    expect(logs.join('')).toContain('a request message interrupted by a lost answer may repeat');
  });
});
