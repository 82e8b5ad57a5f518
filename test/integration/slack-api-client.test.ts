import { once } from 'node:events';
import { createServer as createHttpServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import type { ModalView } from '@slack/types';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type SlackStandIn, startSlackStandIn } from '../../sim/slack/server.ts';
import { SlackApi, VIEWS_OPEN_POLICY } from '../../src/slack-api/client.ts';
import {
  SlackApiError,
  SlackHttpError,
  SlackPlatformError,
  SlackRateLimitedError,
  SlackRequestError,
} from '../../src/slack-api/errors.ts';

const TOKEN = 'xoxb-view-opener-test-token';

let slack: SlackStandIn;
let api: SlackApi;

beforeEach(async () => {
  slack = await startSlackStandIn({ botToken: TOKEN });
  api = new SlackApi({ apiUrl: slack.apiUrl, token: TOKEN });
});
afterEach(async () => {
  await api.close();
  await slack.close();
});

const modal: ModalView = {
  type: 'modal',
  callback_id: 'resize',
  private_metadata: 'draft-1',
  title: { type: 'plain_text', text: 'Resize a VM & more' },
  submit: { type: 'plain_text', text: 'Check and request' },
  blocks: [{ type: 'section', text: { type: 'mrkdwn', text: 'Known of VM 101: *4 cores* = <ok> 100%' } }],
};

/** The error a call failed with. */
async function failureOf(call: Promise<unknown>): Promise<SlackApiError> {
  try {
    await call;
  } catch (error) {
    if (error instanceof SlackApiError) return error;
    throw error;
  }
  throw new Error('the call succeeded');
}

/** A loopback port nobody listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('views.open within a trigger’s life (SlackApi.openView)', () => {
  it('opens the modal exactly as given, with the bot token, and Slack finds nothing wrong', async () => {
    await api.openView(slack.triggerId(), modal);
    expect(slack.problems).toEqual([]);
    expect(slack.callsOf('views.open')).toHaveLength(1);
    expect(slack.views).toHaveLength(1);
    expect(slack.views[0]?.view).toMatchObject(modal);
  });

  it('waits out a rate limit that fits the trigger’s life, then opens once', async () => {
    slack.failNext('views.open', { status: 429, retryAfter: 1 });
    const started = Date.now();
    await api.openView(slack.triggerId(), modal);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(slack.callsOf('views.open').map((c) => c.status)).toEqual([429, 200]);
    expect(slack.views).toHaveLength(1);
  });

  it('gives up at once on a rate limit longer than the trigger lives', async () => {
    // A Retry-After longer than the test's time-out: waiting it out would fail the test.
    slack.failNext('views.open', { status: 429, retryAfter: 3600 });
    expect((await failureOf(api.openView(slack.triggerId(), modal))).code).toBe('ratelimited');
    expect(slack.callsOf('views.open')).toHaveLength(1);
  });

  it('does not retry a refusal, and its error names Slack’s code but never the token', async () => {
    slack.failNext('views.open', { error: 'invalid_auth' });
    const error = await failureOf(api.openView(slack.triggerId(), modal));
    expect(error.code).toBe('invalid_auth');
    expect(`${error.message} ${error.stack}`).not.toContain(TOKEN);
    expect(slack.callsOf('views.open')).toHaveLength(1);
    expect(slack.views).toEqual([]);
  });

  it('refuses a trigger already used by another open (no earlier attempt of its own)', async () => {
    const trigger = slack.triggerId();
    await api.openView(trigger, modal);
    expect((await failureOf(api.openView(trigger, modal))).code).toBe('exchanged_trigger_id');
    expect(slack.views).toHaveLength(1);
  });

  it('retries a refused connection within its policy, then fails with the network code', async () => {
    const port = await closedPort();
    const policy = { ...VIEWS_OPEN_POLICY, attempts: 3, backoffMs: 20 };
    const down = new SlackApi({ apiUrl: `http://127.0.0.1:${port}/api/`, token: TOKEN });
    try {
      const started = Date.now();
      expect((await failureOf(down.openView('1.2.3', modal, policy))).code).toBe('ECONNREFUSED');
      // Two pauses (20 ms, then 40 ms) between three attempts.
      expect(Date.now() - started).toBeGreaterThanOrEqual(55);
    } finally {
      await down.close();
    }
  });
});

describe('SlackApi: one JSON POST per call, failures as classes', () => {
  it('posts JSON with the bot token in the header, and the stand-in finds nothing wrong', async () => {
    const posted = await api.chat.postMessage({
      channel: 'C0API',
      text: 'hello',
      blocks: [{ type: 'section', text: { type: 'mrkdwn', text: '*hello*' } }],
      metadata: { event_type: 'cloudops_test', event_payload: { id: 'R1' } },
    });
    expect(posted.ts).toMatch(/^\d+\.\d+$/);
    await api.chat.update({ channel: 'C0API', ts: posted.ts, text: 'hello again' });
    expect(slack.messages('C0API').map((m) => m.text)).toEqual(['hello again']);
    expect(slack.problems).toEqual([]);
  });

  it('a 429 is a rate limit with Slack’s Retry-After; it neither waits nor retries', async () => {
    // A Retry-After longer than the test's time-out: waiting it out would fail the test.
    slack.failNext('chat.postMessage', { status: 429, retryAfter: 3600 });
    const error = await failureOf(api.chat.postMessage({ channel: 'C0API', text: 'x' }));
    expect(error).toBeInstanceOf(SlackRateLimitedError);
    expect((error as SlackRateLimitedError).retryAfterMs).toBe(3_600_000);
    expect(slack.callsOf('chat.postMessage')).toHaveLength(1);
  });

  it('ok:false, an HTTP error and a closed port each have their class, and none carries the token', async () => {
    slack.failNext('chat.postMessage', { error: 'channel_not_found' });
    const refused = await failureOf(api.chat.postMessage({ channel: 'C0NONE', text: 'x' }));
    expect(refused).toBeInstanceOf(SlackPlatformError);
    expect((refused as SlackPlatformError).error).toBe('channel_not_found');
    slack.failNext('chat.postMessage', { status: 503 });
    const down = await failureOf(api.chat.postMessage({ channel: 'C0API', text: 'x' }));
    expect(down).toBeInstanceOf(SlackHttpError);
    expect((down as SlackHttpError).status).toBe(503);
    const closed = new SlackApi({ apiUrl: `http://127.0.0.1:${await closedPort()}/api/`, token: TOKEN });
    try {
      const unreachable = await failureOf(closed.chat.postMessage({ channel: 'C0API', text: 'x' }));
      expect(unreachable).toBeInstanceOf(SlackRequestError);
      expect((unreachable as SlackRequestError).mayHaveArrived).toBe(false);
    } finally {
      await closed.close();
    }
    for (const error of [refused, down]) expect(`${error.message} ${error.stack}`).not.toContain(TOKEN);
  });
});

/** Answers 200 at once, then one byte every 50 ms, never ending: each byte resets an idle timer. */
function drip(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.write('{"ok":true');
  const timer = setInterval(() => res.write(' '), 50);
  res.on('close', () => clearInterval(timer));
}

describe('a Slack answer that starts and never ends (a gateway or proxy in between)', () => {
  it('a call, and the upload of a file to the URL Slack gave, each fail at their deadline, not never', async () => {
    const server = createHttpServer((req, res) => {
      req.resume();
      if (req.url?.endsWith('files.getUploadURLExternal')) {
        const { port } = server.address() as AddressInfo;
        res.writeHead(200, { 'content-type': 'application/json' });
        return void res.end(
          JSON.stringify({ ok: true, upload_url: `http://127.0.0.1:${port}/upload`, file_id: 'F0DRIP' }),
        );
      }
      drip(res);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    const dripping = new SlackApi({ apiUrl: `http://127.0.0.1:${port}/api/`, token: TOKEN, timeoutMs: 500 });
    try {
      const call = await failureOf(dripping.chat.postMessage({ channel: 'C0API', text: 'x' }));
      expect(call).toBeInstanceOf(SlackRequestError);
      // Sent and not answered in time: it may have arrived.
      expect((call as SlackRequestError).mayHaveArrived).toBe(true);
      expect(call.code).toBe('TimeoutError');
      const upload = await failureOf(
        dripping.uploadFile({ channel: 'C0API', filename: 'chart.png', bytes: Buffer.from('png') }),
      );
      expect(upload).toBeInstanceOf(SlackRequestError);
      expect(upload.code).toBe('TimeoutError');
    } finally {
      await dripping.close();
      server.closeAllConnections();
      server.close();
    }
  }, 30_000);
});
