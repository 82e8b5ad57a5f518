import { createServer, type Server } from 'node:http';
import { WebClient } from '@slack/web-api';
import { Agent, interceptors, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../sim/local-redis.ts';
import { createLogger, type Logger } from '../../src/observability/logger.ts';
import { boltLogger } from '../../src/slack/bolt-logger.ts';

// Secrets the logger is told about, and one it is not (caught by the bearer pattern alone).
const BOT_TOKEN = 'xoxb-1111111111-2222222222-SeCrEtBoTtOkEn0123';
const APP_TOKEN = 'xapp-1-A0000000000-3333333333-SeCrEtApPtOkEn4567';
const SIGNING_SECRET = 'signing-secret-8f14e45fceea167a5a36dedd4bea2543';
const API_KEY = 'ck_live_7b52009b64fd0a2a49e6d8a939753077';
const UNKNOWN_BEARER = 'unlisted-credential-c4ca4238a0b923820dcc';
const SECRETS = [BOT_TOKEN, APP_TOKEN, SIGNING_SECRET, API_KEY];

/** A logger writing into memory, as the bot's own would write to stdout. */
function capturedLogger(level = 'debug'): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const logger = createLogger(
    { level, secrets: SECRETS },
    { write: (line: string) => void lines.push(line) },
  );
  return { logger, lines };
}

/** Fails with the line and the secret when any captured line carries any secret. */
function expectNoSecret(lines: string[]): void {
  for (const line of lines) {
    for (const secret of [...SECRETS, UNKNOWN_BEARER]) {
      expect(line.includes(secret), `secret ${secret.slice(0, 8)}… in ${line}`).toBe(false);
    }
  }
}

// A server that echoes the credentials it receives, in a header and in the body, as some APIs do in errors.
let echo: Server;
let echoUrl: string;
beforeAll(async () => {
  echo = createServer((req, res) => {
    const auth = req.headers.authorization ?? '';
    let body = '';
    req.on('data', (chunk: Buffer) => {
      body += chunk.toString();
    });
    req.on('end', () => {
      if (req.url?.includes('platform')) {
        res.writeHead(200, { 'content-type': 'application/json', 'x-echo-auth': auth });
        res.end(JSON.stringify({ ok: false, error: 'invalid_auth', received: auth, args: body }));
        return;
      }
      res.writeHead(500, { 'content-type': 'application/json', 'x-echo-auth': auth });
      res.end(JSON.stringify({ detail: `bad credentials: ${auth}`, args: body }));
    });
  });
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', () => resolve()));
  const address = echo.address();
  echoUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
});
afterAll(() => new Promise<void>((resolve) => echo.close(() => resolve())));

describe('log redaction', () => {
  it('an error whose message, cause and headers quote the API key and a bearer header', () => {
    const { logger, lines } = capturedLogger();
    const cause = new Error(`upstream said: Authorization: Bearer ${API_KEY} is not valid`);
    const error = Object.assign(new Error(`resize failed for key ${API_KEY}`, { cause }), {
      code: 'CLOUD_REFUSED',
      headers: { authorization: `Bearer ${API_KEY}` },
      config: { signingSecret: SIGNING_SECRET },
    });
    logger.error(error, 'resize failed');
    logger.warn({ err: error, requestId: 'req-1' }, 'resize failed, as a field');
    logger.info({ headers: { Authorization: `Bearer ${UNKNOWN_BEARER}` } }, 'outgoing call');
    logger.info({ request: { headers: { authorization: `Bearer ${UNKNOWN_BEARER}` } } }, 'nested headers');
    logger.info({ env: { SLACK_BOT_TOKEN: BOT_TOKEN, CLOUD_API_KEY: API_KEY, PORT: 3000 } }, 'config');
    logger.info('format args: %s %s', APP_TOKEN, `Bearer ${UNKNOWN_BEARER}`);
    logger.info({ url: `https://api.example.com/cloud/cluster/?api_key=${API_KEY}` }, 'url in a field');

    expect(lines).toHaveLength(7);
    expectNoSecret(lines);
    const first = JSON.parse(lines[0]!) as {
      err: { message: string; code: string; cause: { message: string } };
    };
    // What is not secret survives: the message, the code, the cause.
    expect(first.err.message).toBe('resize failed for key [redacted]');
    expect(first.err.code).toBe('CLOUD_REFUSED');
    expect(first.err.cause.message).toBe('upstream said: Authorization: Bearer [redacted] is not valid');
    expect(JSON.parse(lines[4]!).env.PORT).toBe(3000);
  });

  it('an undici ResponseError carrying the echoed credential in its body and headers', async () => {
    const { logger, lines } = capturedLogger();
    const agent = new Agent().compose(interceptors.responseError());
    const error = await request(`${echoUrl}/cloud/cluster/zone-1/`, {
      dispatcher: agent,
      headers: { authorization: `Bearer ${API_KEY}` },
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    await agent.close();
    // The precondition: the raw error really does carry the key.
    expect(JSON.stringify(error)).toContain(API_KEY);
    logger.error({ err: error, operation: 'getB' }, 'cloud call failed');
    logger.error({ error }, 'cloud call failed, under another key');
    logger.debug({ response: error }, 'raw response error object');
    expect(lines).toHaveLength(3);
    expectNoSecret(lines);
    expect(JSON.parse(lines[0]!).err).toMatchObject({ code: 'UND_ERR_RESPONSE', status: 500 });
  });

  it('an undici connection error for a call that carried the key', async () => {
    const { logger, lines } = capturedLogger();
    // A port nothing listens on (fetch refuses "bad ports" such as 1 before connecting).
    const url = `http://127.0.0.1:${await freePort()}/cloud/cluster/`;
    const error = await fetch(url, {
      headers: { authorization: `Bearer ${API_KEY}` },
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    logger.warn(
      {
        err: error,
        url: 'http://127.0.0.1:1/cloud/cluster/',
        headers: { authorization: `Bearer ${API_KEY}` },
      },
      'no answer',
    );
    expectNoSecret(lines);
    expect(JSON.parse(lines[0]!).err.cause.code).toBe('ECONNREFUSED');
  });

  it('Slack WebClient errors (HTTP and platform) after a call with the bot token', async () => {
    const { logger, lines } = capturedLogger();
    const web = new WebClient(BOT_TOKEN, { slackApiUrl: `${echoUrl}/api/`, retryConfig: { retries: 0 } });
    const httpError = await web.chat.postMessage({ channel: 'C0PROD', text: 'hi' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    const platform = new WebClient(BOT_TOKEN, {
      slackApiUrl: `${echoUrl}/platform/`,
      retryConfig: { retries: 0 },
    });
    const platformError = await platform.chat.update({ channel: 'C0PROD', ts: '1.2', text: 'x' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(JSON.stringify(httpError)).toContain(BOT_TOKEN);
    expect(JSON.stringify(platformError)).toContain(BOT_TOKEN);

    logger.error({ err: httpError, method: 'chat.postMessage' }, 'slack call failed');
    logger.error({ err: platformError, method: 'chat.update' }, 'slack call failed');
    logger.error({ data: (platformError as { data?: unknown }).data }, 'the platform error data itself');
    // Bolt's own lines go through the adapter in src/slack/bolt-logger.ts.
    const bolt = boltLogger(logger);
    bolt.error(httpError);
    bolt.warn('slack said', platformError, {
      token: BOT_TOKEN,
      headers: { authorization: `Bearer ${BOT_TOKEN}` },
    });
    bolt.debug(`initializing with token ${BOT_TOKEN} and app token ${APP_TOKEN}`);

    expect(lines).toHaveLength(6);
    expectNoSecret(lines);
    expect(JSON.parse(lines[0]!).err).toMatchObject({ code: 'slack_webapi_http_error', status: 500 });
    expect(JSON.parse(lines[1]!).err.message).toContain('invalid_auth');
  });

  it('child loggers carry request and job ids on every line, and stay redacted', () => {
    const { logger, lines } = capturedLogger();
    const job = logger.child({ requestId: 'r-42', jobId: 'r-42:execute' });
    job.info({ apiKey: API_KEY }, 'calling resize');
    job.child({ step: 2 }).error(new Error(`Bearer ${API_KEY} rejected`), 'step failed');
    logger.child({ callbackUrl: `https://hooks.example/?t=${BOT_TOKEN}` }).info('bindings with a secret');

    expect(lines).toHaveLength(3);
    expectNoSecret(lines);
    const [first, second] = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(first).toMatchObject({ requestId: 'r-42', jobId: 'r-42:execute', apiKey: '[redacted]' });
    expect(second).toMatchObject({ requestId: 'r-42', jobId: 'r-42:execute', step: 2 });
  });
});
