import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { type SlackStandIn, startSlackStandIn } from '../../sim/slack/server.ts';

// The Socket Mode stand-in on its own, driven by a bare WebSocket client: what the bot relies on it to do like Slack.
const APP_TOKEN = 'xapp-1-A0CLOUDOPS-standin-test';
let slack: SlackStandIn;
const sockets: WebSocket[] = [];

beforeAll(async () => {
  slack = await startSlackStandIn({ appToken: APP_TOKEN, ackTimeoutMs: 1000 });
});
afterEach(() => {
  for (const ws of sockets.splice(0)) ws.terminate();
  slack.problems.splice(0);
});
afterAll(async () => {
  await slack.close();
});

async function open(token: string): Promise<Record<string, unknown>> {
  const response = await request(`${slack.apiUrl}apps.connections.open`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: '',
  });
  return (await response.body.json()) as Record<string, unknown>;
}

/** Opens a link as the app does; resolves with the socket and the messages it receives. */
async function connect(): Promise<{ ws: WebSocket; messages: Record<string, unknown>[] }> {
  const { url } = await open(APP_TOKEN);
  const ws = new WebSocket(String(url));
  sockets.push(ws);
  const messages: Record<string, unknown>[] = [];
  ws.on('message', (data) => messages.push(JSON.parse(data.toString()) as Record<string, unknown>));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  await until(() => messages.length > 0);
  return { ws, messages };
}

async function until(done: () => boolean, timeoutMs = 2000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Answers every envelope with `payload(envelope)`. */
function ackAll(
  ws: WebSocket,
  payload: (envelope: Record<string, unknown>) => Record<string, unknown> | undefined = () => undefined,
): void {
  ws.on('message', (data) => {
    const envelope = JSON.parse(data.toString()) as Record<string, unknown>;
    if (typeof envelope.envelope_id !== 'string') return;
    ws.send(JSON.stringify({ envelope_id: envelope.envelope_id, payload: payload(envelope) ?? {} }));
  });
}

describe('apps.connections.open', () => {
  it('answers a ws:// URL with a ticket for the app-level token only', async () => {
    const answer = await open(APP_TOKEN);
    expect(answer.ok).toBe(true);
    expect(String(answer.url)).toMatch(
      /^ws:\/\/127\.0\.0\.1:\d+\/link\/\?ticket=[0-9a-f]+&app_id=A0CLOUDOPS$/,
    );
    expect(await open(slack.botToken)).toEqual({ ok: false, error: 'not_allowed_token_type' });
    expect(await open('xapp-1-somebody-else')).toEqual({ ok: false, error: 'invalid_auth' });
    // The bot token's methods refuse the app-level token.
    const auth = await request(`${slack.apiUrl}auth.test`, {
      method: 'POST',
      headers: { authorization: `Bearer ${APP_TOKEN}` },
    });
    expect(await auth.body.json()).toEqual({ ok: false, error: 'not_allowed_token_type' });
    expect(slack.problems).toEqual([]);
  });

  it('a ticket opens one socket: used again, or made up, the upgrade is refused', async () => {
    const { url } = await open(APP_TOKEN);
    const first = new WebSocket(String(url));
    sockets.push(first);
    await new Promise((resolve) => first.once('open', resolve));
    for (const reuse of [String(url), String(url).replace(/ticket=[0-9a-f]+/, 'ticket=made-up')]) {
      const again = new WebSocket(reuse);
      const status = await new Promise<number | undefined>((resolve) => {
        again.once('unexpected-response', (_req, res) => resolve(res.statusCode));
        again.once('open', () => resolve(undefined));
      });
      expect(status).toBe(401);
    }
  });
});

describe('the link', () => {
  it('greets with hello, then sends envelopes and reads acks by envelope_id', async () => {
    const { ws, messages } = await connect();
    expect(messages[0]).toMatchObject({ type: 'hello', connection_info: { app_id: 'A0CLOUDOPS' } });
    ackAll(ws, (e) =>
      e.type === 'slash_commands' ? { response_type: 'ephemeral', text: 'usage' } : undefined,
    );
    const command = await slack.socket.deliver('slash_commands', { command: '/cloud', text: 'help' });
    expect(command.payload).toEqual({ response_type: 'ephemeral', text: 'usage' });
    expect(messages.at(-1)).toMatchObject({
      type: 'slash_commands',
      envelope_id: command.envelopeId,
      accepts_response_payload: true,
      payload: { command: '/cloud', text: 'help' },
    });
    const event = await slack.socket.deliver('events_api', {
      event_id: 'Ev01',
      event: { type: 'app_mention' },
    });
    expect(event.payload).toBeUndefined();
    expect(messages.at(-1)).toMatchObject({
      type: 'events_api',
      retry_attempt: 0,
      accepts_response_payload: false,
    });
    const retry = await slack.socket.redeliver(event.envelopeId);
    expect(retry.envelopeId).toBe(event.envelopeId);
    expect(messages.at(-1)).toMatchObject({ retry_attempt: 1, retry_reason: 'timeout' });
    expect(slack.problems).toEqual([]);
  });

  it('records what Slack would refuse in an ack: errors for blocks that are no inputs, payloads nobody reads', async () => {
    const { ws } = await connect();
    ackAll(ws, (e) => {
      const payload = e.payload as { type?: string };
      if (payload.type === 'view_submission')
        return { response_action: 'errors', errors: { not_an_input: 'wrong', cores: 'too many' } };
      return { text: 'nobody reads this' };
    });
    await slack.socket.deliver('interactive', {
      type: 'view_submission',
      view: {
        type: 'modal',
        blocks: [{ type: 'input', block_id: 'cores', label: { type: 'plain_text', text: 'Cores' } }],
      },
    });
    await slack.socket.deliver('interactive', { type: 'block_actions' });
    expect(slack.problems).toEqual([
      { method: 'ack', why: 'an error for `not_an_input`, not an input block of the view' },
      { method: 'ack', why: 'a payload in the ack of an envelope that accepts none (interactive)' },
    ]);
  });

  it('an envelope nobody acks rejects after the ack timeout', async () => {
    await connect();
    await expect(slack.socket.deliver('slash_commands', { text: 'x' })).rejects.toThrow(/no ack/);
  });

  it('disconnect sends the reason and closes when told; drop and refused upgrades are counted', async () => {
    const { ws, messages } = await connect();
    const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    slack.socket.disconnect('refresh_requested', 10);
    expect(await closed).toBe(1001);
    expect(messages.at(-1)).toMatchObject({ type: 'disconnect', reason: 'refresh_requested' });

    const second = await connect();
    const dropped = new Promise<number>((resolve) => second.ws.once('close', (code) => resolve(code)));
    slack.socket.drop();
    expect(await dropped).toBe(1006);
    await slack.socket.waitForNoConnection(1000);

    slack.socket.refuseConnections(1);
    const { url } = await open(APP_TOKEN);
    const refused = new WebSocket(String(url));
    const status = await new Promise<number | undefined>((resolve) => {
      refused.once('unexpected-response', (_req, res) => resolve(res.statusCode));
      refused.once('open', () => resolve(undefined));
    });
    expect(status).toBe(503);
    const third = await connect();
    expect(third.messages[0]?.type).toBe('hello');
  });
});
