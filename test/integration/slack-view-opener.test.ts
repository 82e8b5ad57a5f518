import { createServer } from 'node:net';
import type { ModalView } from '@slack/types';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type SlackStandIn, startSlackStandIn } from '../../sim/slack/server.ts';
import {
  createViewOpener,
  VIEWS_OPEN_POLICY,
  ViewOpenError,
  type ViewOpener,
} from '../../src/slack/view-opener.ts';

const TOKEN = 'xoxb-view-opener-test-token';

let slack: SlackStandIn;
let opener: ViewOpener;

beforeEach(async () => {
  slack = await startSlackStandIn({ botToken: TOKEN });
  opener = createViewOpener({ apiUrl: slack.apiUrl, token: TOKEN });
});
afterEach(async () => {
  await opener.close();
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

/** The error an open failed with. */
async function failureOf(call: Promise<void>): Promise<ViewOpenError> {
  try {
    await call;
  } catch (error) {
    if (error instanceof ViewOpenError) return error;
    throw error;
  }
  throw new Error('the open succeeded');
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

describe('view opener (views.open as one POST)', () => {
  it('opens the modal exactly as given, with the bot token, and Slack finds nothing wrong', async () => {
    await opener.open(slack.triggerId(), modal);
    expect(slack.problems).toEqual([]);
    expect(slack.callsOf('views.open')).toHaveLength(1);
    expect(slack.views).toHaveLength(1);
    expect(slack.views[0]?.view).toMatchObject(modal);
  });

  it('waits out a rate limit that fits the trigger’s life, then opens once', async () => {
    slack.failNext('views.open', { status: 429, retryAfter: 1 });
    const started = Date.now();
    await opener.open(slack.triggerId(), modal);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(slack.callsOf('views.open').map((c) => c.status)).toEqual([429, 200]);
    expect(slack.views).toHaveLength(1);
  });

  it('gives up at once on a rate limit longer than the trigger lives', async () => {
    slack.failNext('views.open', { status: 429, retryAfter: 30 });
    const started = Date.now();
    expect((await failureOf(opener.open(slack.triggerId(), modal))).error).toBe('ratelimited');
    expect(Date.now() - started).toBeLessThan(1000);
    expect(slack.callsOf('views.open')).toHaveLength(1);
  });

  it('does not retry a refusal, and its error names Slack’s code but never the token', async () => {
    slack.failNext('views.open', { error: 'invalid_auth' });
    const error = await failureOf(opener.open(slack.triggerId(), modal));
    expect(error.error).toBe('invalid_auth');
    expect(`${error.message} ${error.stack}`).not.toContain(TOKEN);
    expect(slack.callsOf('views.open')).toHaveLength(1);
    expect(slack.views).toEqual([]);
  });

  it('refuses a trigger already used by another open (no earlier attempt of its own)', async () => {
    const trigger = slack.triggerId();
    await opener.open(trigger, modal);
    expect((await failureOf(opener.open(trigger, modal))).error).toBe('exchanged_trigger_id');
    expect(slack.views).toHaveLength(1);
  });

  it('retries a refused connection within its policy, then fails with the network code', async () => {
    const port = await closedPort();
    const policy = { ...VIEWS_OPEN_POLICY, attempts: 3, backoffMs: 20 };
    const down = createViewOpener({ apiUrl: `http://127.0.0.1:${port}/api/`, token: TOKEN, policy });
    try {
      const started = Date.now();
      expect((await failureOf(down.open('1.2.3', modal))).error).toBe('ECONNREFUSED');
      // Two pauses (20 ms, then 40 ms) between three attempts.
      expect(Date.now() - started).toBeGreaterThanOrEqual(55);
    } finally {
      await down.close();
    }
  });
});
