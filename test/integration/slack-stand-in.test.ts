import { type WebAPIPlatformError, type WebAPIRateLimitedError, WebClient } from '@slack/web-api';
import { request } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type SlackStandIn, startSlackStandIn } from '../../sim/slack/server.ts';

let slack: SlackStandIn;
let client: WebClient;

beforeEach(async () => {
  slack = await startSlackStandIn({ botToken: 'xoxb-stand-in-test' });
  client = new WebClient(slack.botToken, {
    slackApiUrl: slack.apiUrl,
    retryConfig: { retries: 0 },
    rejectRateLimitedCalls: true,
  });
});
afterEach(async () => {
  await slack.close();
});

const section = (text: string) => ({ type: 'section', text: { type: 'mrkdwn', text } });

/** The Slack error code a WebClient call failed with. */
async function errorOf(call: Promise<unknown>): Promise<string | undefined> {
  try {
    await call;
    return undefined;
  } catch (error) {
    return (error as WebAPIPlatformError).data?.error;
  }
}

describe('Slack stand-in: schema and argument checks', () => {
  it('refuses a block with a wrong text type, records why, and stores nothing', async () => {
    const bad = [{ type: 'section', text: { type: 'markdown_text', text: 'hi' } }];
    expect(
      await errorOf(client.chat.postMessage({ channel: 'C0PROD', text: 'x', blocks: bad as never })),
    ).toBe('invalid_blocks');
    expect(slack.problems).toHaveLength(1);
    expect(slack.problems[0]?.method).toBe('chat.postMessage');
    expect(slack.problems[0]?.why).toMatch(/schema: \/0\/text/);
    expect(slack.messages('C0PROD')).toEqual([]);
  });

  it('refuses a 51-block message but takes 50', async () => {
    const blocks = Array.from({ length: 51 }, (_, i) => section(`line ${i}`));
    expect(await errorOf(client.chat.postMessage({ channel: 'C0PROD', text: 'x', blocks }))).toBe(
      'invalid_blocks',
    );
    expect(slack.problems.map((p) => p.why)).toEqual(['51 blocks in a message (Slack allows 50)']);
    await client.chat.postMessage({ channel: 'C0PROD', text: 'x', blocks: blocks.slice(0, 50) });
    expect(slack.messages('C0PROD')).toHaveLength(1);
    expect(slack.problems).toHaveLength(1);
  });

  it('refuses a text object over 3000 characters, a 101-block modal and a modal title over 24', async () => {
    expect(
      await errorOf(
        client.chat.postMessage({ channel: 'C0PROD', text: 'x', blocks: [section('a'.repeat(3001))] }),
      ),
    ).toBe('invalid_blocks');
    const modal = (blocks: unknown[], title = 'Title') => ({
      type: 'modal',
      title: { type: 'plain_text', text: title },
      blocks,
    });
    const trigger = () => slack.triggerId();
    expect(
      await errorOf(
        client.views.open({
          trigger_id: trigger(),
          view: modal(Array.from({ length: 101 }, () => section('a'))) as never,
        }),
      ),
    ).toBe('invalid_blocks');
    expect(
      await errorOf(
        client.views.open({ trigger_id: trigger(), view: modal([section('a')], 'x'.repeat(25)) as never }),
      ),
    ).toBe('invalid_blocks');
    const whys = slack.problems.map((p) => `${p.method}: ${p.why}`);
    expect(whys.some((w) => /chat.postMessage: .*3001 characters/.test(w))).toBe(true);
    expect(whys).toContain('views.open: 101 blocks in a view (Slack allows 100)');
    expect(whys.some((w) => w.startsWith('views.open: schema: /title/text'))).toBe(true);
  });

  it('checks required and unknown arguments against the method files', async () => {
    expect(await errorOf(client.apiCall('chat.postMessage', { channel: 'C0PROD' }))).toBe(
      'invalid_arguments',
    );
    expect(
      await errorOf(
        client.apiCall('views.open', {
          view: { type: 'modal', title: { type: 'plain_text', text: 't' }, blocks: [section('a')] },
        }),
      ),
    ).toBe('invalid_arguments');
    expect(
      await errorOf(client.apiCall('chat.postMessage', { channel: 'C0PROD', text: 'x', colour: 'red' })),
    ).toBe('invalid_arguments');
    expect(await errorOf(client.apiCall('chat.frobnicate', {}))).toBe('unknown_method');
    expect(slack.problems.map((p) => p.why)).toEqual([
      'one of `text`, `blocks`, `attachments`, `markdown_text` is required',
      'one of `trigger_id`, `interactivity_pointer` is required',
      'unknown argument `colour`',
      'no method file: Slack has no such method, or the bot calls one nobody checked',
    ]);
    // Bolt adds team_id to every call; Slack accepts it.
    await client.apiCall('chat.postMessage', { channel: 'C0PROD', text: 'x', team_id: 'T0TEST' });
    expect(slack.problems).toHaveLength(4);
  });
});

describe('Slack stand-in: behaviour', () => {
  it('refuses a wrong token, from the header or the token argument', async () => {
    const wrong = new WebClient('xoxb-wrong', { slackApiUrl: slack.apiUrl, retryConfig: { retries: 0 } });
    expect(await errorOf(wrong.auth.test())).toBe('invalid_auth');
    const form = await request(`${slack.apiUrl}auth.test`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `token=${slack.botToken}`,
    });
    expect(await form.body.json()).toMatchObject({
      ok: true,
      user_id: slack.botUserId,
      team_id: slack.teamId,
    });
  });

  it('takes JSON bodies, posts, threads, updates and deletes messages with realistic ts', async () => {
    const posted = await request(`${slack.apiUrl}chat.postMessage`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json; charset=utf-8',
        authorization: `Bearer ${slack.botToken}`,
      },
      body: JSON.stringify({ channel: 'C0PROD', text: 'request', blocks: [section('*request*')] }),
    });
    const root = (await posted.body.json()) as { ok: boolean; ts: string; channel: string };
    expect(root).toMatchObject({ ok: true, channel: 'C0PROD' });
    expect(root.ts).toMatch(/^\d{10}\.\d{6}$/);
    const reply = await client.chat.postMessage({ channel: 'C0PROD', thread_ts: root.ts, text: 'done' });
    expect(Number(reply.ts)).toBeGreaterThan(Number(root.ts));
    await client.chat.update({ channel: 'C0PROD', ts: root.ts, text: 'request (done)' });
    const [message, threaded] = slack.messages('C0PROD');
    expect(message).toMatchObject({
      ts: root.ts,
      text: 'request (done)',
      blocks: [section('*request*')],
      edits: 1,
    });
    expect(threaded).toMatchObject({ thread_ts: root.ts, text: 'done' });
    expect(slack.thread('C0PROD', root.ts).map((m) => m.text)).toEqual(['done']);
    expect(slack.threadReplyCount()).toBe(1);
    expect(await errorOf(client.chat.update({ channel: 'C0PROD', ts: '1.000001', text: 'x' }))).toBe(
      'message_not_found',
    );
    await client.chat.delete({ channel: 'C0PROD', ts: root.ts });
    expect(slack.messages('C0PROD').map((m) => m.text)).toEqual(['done']);
    // A deleted message is gone from the lookup too; a deleted reply leaves the count.
    expect(await errorOf(client.chat.update({ channel: 'C0PROD', ts: root.ts, text: 'x' }))).toBe(
      'message_not_found',
    );
    await client.chat.delete({ channel: 'C0PROD', ts: threaded?.ts ?? '' });
    expect(slack.threadReplyCount()).toBe(0);
    expect(slack.problems).toEqual([]);
  });

  it('opens views with ids, refuses used and expired trigger ids, updates by view id', async () => {
    const view = {
      type: 'modal' as const,
      callback_id: 'x',
      title: { type: 'plain_text' as const, text: 'T' },
      blocks: [section('a')] as never,
    };
    const trigger = slack.triggerId();
    const opened = await client.views.open({ trigger_id: trigger, view });
    expect(opened.view?.id).toMatch(/^V0/);
    expect(await errorOf(client.views.open({ trigger_id: trigger, view }))).toBe('exchanged_trigger_id');
    await client.views.update({
      view_id: opened.view?.id ?? '',
      view: { ...view, title: { type: 'plain_text', text: 'T2' } },
    });
    expect(slack.views.map((v) => v.method)).toEqual(['views.open', 'views.update']);
    expect(slack.views[1]?.view.title).toEqual({ type: 'plain_text', text: 'T2' });
    const short = await startSlackStandIn({ triggerTtlMs: 0 });
    const shortClient = new WebClient(short.botToken, {
      slackApiUrl: short.apiUrl,
      retryConfig: { retries: 0 },
    });
    const old = short.triggerId();
    await new Promise((r) => setTimeout(r, 5));
    expect(await errorOf(shortClient.views.open({ trigger_id: old, view }))).toBe('expired_trigger_id');
    await short.close();
  });

  it('records response_url posts: ephemeral, in_channel, replace_original and delete_original', async () => {
    const posted = await client.chat.postMessage({ channel: 'C0PROD', text: 'original' });
    const url = slack.responseUrl({ channel: 'C0PROD', user: 'U0DEV', messageTs: posted.ts });
    const post = (body: unknown) =>
      request(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    expect((await post({ text: 'only you' })).statusCode).toBe(200);
    expect(slack.ephemerals('C0PROD', 'U0DEV').map((m) => m.text)).toEqual(['only you']);
    await post({ replace_original: true, text: 'replaced', blocks: [section('replaced')] });
    expect(slack.messages('C0PROD')[0]).toMatchObject({ text: 'replaced', edits: 1 });
    await post({ response_type: 'in_channel', text: 'for all' });
    expect(slack.messages('C0PROD').map((m) => m.text)).toEqual(['replaced', 'for all']);
    await post({ delete_original: true });
    expect(slack.messages('C0PROD').map((m) => m.text)).toEqual(['for all']);
    expect((await post({ text: 'fifth use' })).statusCode).toBe(200);
    expect((await post({ text: 'sixth use' })).statusCode).toBe(404);
    expect(slack.responses.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 404]);
    const bad = await post({ text: 'x', blocks: [{ type: 'nonsense' }] });
    expect(bad.statusCode).toBe(404);
    expect(slack.problems).toEqual([]);
    const fresh = slack.responseUrl({ channel: 'C0PROD' });
    const refused = await request(fresh, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'x', blocks: [{ type: 'nonsense' }] }),
    });
    expect(refused.statusCode).toBe(400);
    expect(slack.problems[0]?.method).toBe('response_url');
  });

  it('fails the next calls on request, with 429 and Retry-After as Slack does, then recovers', async () => {
    slack.failNext('chat.postMessage', { status: 429, retryAfter: 7 });
    const error = await client.chat.postMessage({ channel: 'C0PROD', text: 'x' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    expect((error as WebAPIRateLimitedError).code).toBe('slack_webapi_rate_limited_error');
    expect((error as WebAPIRateLimitedError).retryAfter).toBe(7);
    slack.failNext('chat.update', { error: 'internal_error', times: 2 });
    for (let i = 0; i < 2; i++)
      expect(await errorOf(client.chat.update({ channel: 'C0PROD', ts: '1.1', text: 'x' }))).toBe(
        'internal_error',
      );
    expect(await errorOf(client.chat.update({ channel: 'C0PROD', ts: '1.1', text: 'x' }))).toBe(
      'message_not_found',
    );
    await client.chat.postMessage({ channel: 'C0PROD', text: 'now it works' });
    expect(slack.callsOf('chat.postMessage').map((c) => c.status)).toEqual([429, 200]);
    // Failures queued on one method apply in order.
    slack.failNext('chat.postEphemeral', { status: 429 });
    slack.failNext('chat.postEphemeral', { error: 'fatal_error' });
    const ephemeral = () => client.chat.postEphemeral({ channel: 'C0PROD', user: 'U0DEV', text: 'x' });
    expect(await ephemeral().catch((e: WebAPIRateLimitedError) => e.code)).toBe(
      'slack_webapi_rate_limited_error',
    );
    expect(await errorOf(ephemeral())).toBe('fatal_error');
    expect(await errorOf(ephemeral())).toBeUndefined();
  });

  it('limits posts per channel per second, answering 429 with Retry-After', async () => {
    slack.limitPerChannel(2);
    const results = await Promise.all(
      [1, 2, 3].map((n) =>
        client.chat.postMessage({ channel: 'C0PROD', text: `m${n}` }).then(
          () => 'ok',
          (e: WebAPIRateLimitedError) => e.retryAfter,
        ),
      ),
    );
    expect(results.filter((r) => r === 'ok')).toHaveLength(2);
    expect(results.filter((r) => r === 1)).toHaveLength(1);
    await client.chat.postMessage({ channel: 'C0OTHER', text: 'other channel' });
    expect(slack.messages().length).toBe(3);
  });

  it('waitFor resolves on a later call and times out with the last calls named', async () => {
    const waiting = slack.waitFor(() => slack.messages('C0PROD').find((m) => m.text === 'later'), 2000);
    setTimeout(() => void client.chat.postMessage({ channel: 'C0PROD', text: 'later' }), 20);
    expect((await waiting).text).toBe('later');
    await expect(slack.waitFor(() => false, 50)).rejects.toThrow(
      /timed out after 50 ms; last calls: chat.postMessage→200/,
    );
  });

  it('uploads files in two steps and posts them', async () => {
    const url = await client.files.getUploadURLExternal({ filename: 'digest.txt', length: 5 });
    expect(url.upload_url).toContain(slack.url);
    await request(url.upload_url ?? '', { method: 'POST', body: 'hello' });
    const fileId = url.file_id ?? '';
    await client.files.completeUploadExternal({
      files: [{ id: fileId, title: 'digest' }],
      channel_id: 'C0PROD',
    });
    expect(slack.messages('C0PROD')[0]?.files).toEqual([{ id: fileId, title: 'digest' }]);
    expect(slack.problems).toEqual([]);
  });
});
