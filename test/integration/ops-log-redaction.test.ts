import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebClient } from '@slack/web-api';
import { Agent, interceptors, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../sim/local-redis.ts';
import { createLogger, type Logger } from '../../src/observability/logger.ts';
import { boltLogger } from '../../src/slack/bolt-logger.ts';
import { spawnBot } from '../helpers/bot-process.ts';
import { OPS, type OpsBot, startOpsBot } from '../helpers/ops-bot.ts';
import { testRedisUrl } from '../helpers/redis.ts';
import { TEST_SEAL_KEY, TEST_SEAL_KEY_PREVIOUS } from '../helpers/seal.ts';
import {
  blockActionsPayload,
  interactionBody,
  viewState,
  viewSubmissionPayload,
} from '../helpers/slack-request.ts';
import { JOBS_POLICY_YAML, resizeOf, startJobsEnv, until, waitForReplies } from './jobs-env.ts';

// Secrets the logger is told about, and one it is not (caught by the bearer pattern alone).
const BOT_TOKEN = 'xoxb-1111111111-2222222222-SeCrEtBoTtOkEn0123';
const APP_TOKEN = 'xapp-1-A0000000000-3333333333-SeCrEtApPtOkEn4567';
const SIGNING_SECRET = 'signing-secret-8f14e45fceea167a5a36dedd4bea2543';
const API_KEY = 'ck_live_7b52009b64fd0a2a49e6d8a939753077';
const UNKNOWN_BEARER = 'unlisted-credential-c4ca4238a0b923820dcc';
const OIDC_SECRET = 'sso-client-secret-9d5ed678fe57bcca610140957afab571';
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
    for (const secret of [...SECRETS, UNKNOWN_BEARER, OIDC_SECRET, TEST_SEAL_KEY, TEST_SEAL_KEY_PREVIOUS]) {
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
    logger.info(
      {
        env: {
          SLACK_BOT_TOKEN: BOT_TOKEN,
          CLOUD_API_KEY: API_KEY,
          SEAL_KEY: TEST_SEAL_KEY,
          SEAL_KEY_PREVIOUS: TEST_SEAL_KEY_PREVIOUS,
          OIDC_CLIENT_SECRET: OIDC_SECRET,
          PORT: 3000,
        },
      },
      'config',
    );
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

describe('the running bot at LOG_LEVEL=debug, under traffic and faults', () => {
  let ops: OpsBot;
  beforeAll(async () => {
    ops = await startOpsBot({ redisUrl: testRedisUrl(), logLevel: 'debug' });
  });
  afterAll(async () => {
    await ops?.close();
  });

  it('logs no token, signing secret or API key, and says none in Slack', async () => {
    const { slack, sim } = ops;
    // Signed commands, and the same traffic forged, unsigned and stale.
    for (const text of ['help', 'clusters', 'cluster zone-1', 'jobs', 'digest now']) {
      expect((await ops.command(text)).status, text).toBe(200);
    }
    const body = 'command=/cloud&text=help&team_id=T0OPS';
    expect((await ops.send(body, { unsigned: true })).status).toBe(401);
    expect((await ops.send(body, { signature: 'v0=00' })).status).toBe(401);
    expect((await ops.send(body, { timestamp: Math.floor(Date.now() / 1000) - 600 })).status).toBe(401);

    // Faults on both sides: the API answers 503 once, Slack refuses a modal once.
    sim.fault('list', { kind: 'status', status: 503 });
    expect((await ops.command('clusters')).status).toBe(200);
    slack.failNext('views.open', { error: 'invalid_auth' });
    expect((await ops.command('resize shop-prod 102 cores=6')).status).toBe(200);

    // A whole resize: modal, submit, request message, approval by the lead, the API call, the thread reply.
    const opened = slack.views.length;
    expect((await ops.command('resize shop-prod 102 cores=6')).status).toBe(200);
    const view = await slack.waitFor(() => slack.views.slice(opened).find((v) => v.method === 'views.open'));
    const submit = viewSubmissionPayload(
      { user: OPS.dev, channel: OPS.channel, teamId: OPS.team },
      view.view,
      viewState(view.view, { reason: 'load test' }),
      slack.triggerId(),
    );
    expect((await ops.send(interactionBody(submit))).json).toEqual({ response_action: 'clear' });
    const posted = await slack.waitFor(
      () =>
        slack
          .messages(OPS.channel)
          .find((m) => m.thread_ts === undefined && /\(request [^)]+\)/.test(m.text ?? '')),
      30_000,
    );
    const requestId = /\(request ([^)]+)\)/.exec(posted.text ?? '')![1]!;
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
    await slack.waitFor(
      () => slack.thread(OPS.channel, posted.ts).find((m) => /resized|succeeded|done/i.test(m.text ?? '')),
      30_000,
    );
    expect(sim.applied.map((a) => a.vmid)).toEqual([102]);

    // The secrets really were in flight: the stand-in saw the bot token, the sim the API key.
    expect(slack.calls.length).toBeGreaterThan(3);
    expect(sim.calls.some((c) => c.headers.authorization === `Bearer ${ops.secrets.apiKey}`)).toBe(true);
    // Debug lines were written (Bolt's HTTP traces included), and none carries a secret.
    const levels = ops.logs.map((line) => (JSON.parse(line) as { level: string }).level);
    expect(levels.filter((level) => level === 'debug').length).toBeGreaterThan(10);
    expect(levels.some((level) => level === 'warn' || level === 'error')).toBe(true);
    const everything = [
      ...ops.logs,
      ...slack.messages().map((m) => JSON.stringify(m)),
      ...slack.ephemerals().map((m) => JSON.stringify(m)),
      ...slack.responses.map((r) => JSON.stringify(r.body)),
      ...slack.views.map((v) => JSON.stringify(v.view)),
    ];
    for (const secret of Object.values(ops.secrets)) {
      expect(everything.filter((line) => line.includes(secret))).toEqual([]);
    }
    expect(slack.problems).toEqual([]);
  });
});

describe('the logger npm start builds itself (no injected logger)', { timeout: 120_000 }, () => {
  it('scrubs the cloud API key pasted into a reason from the Web API client’s debug lines', async () => {
    const env = await startJobsEnv({ name: 'redaction-start' });
    const dir = await mkdtemp(join(tmpdir(), 'cloudops-redaction-'));
    const policy = join(dir, 'policy.yml');
    await writeFile(policy, JOBS_POLICY_YAML);
    const bot = spawnBot(
      {
        SLACK_BOT_TOKEN: env.slack.botToken,
        SLACK_API_URL: env.slack.apiUrl,
        CLOUD_API_URL: env.sim.url,
        CLOUD_API_KEY: env.sim.apiKey,
        SEAL_KEY: TEST_SEAL_KEY,
        OIDC_ISSUER: 'https://login.example.com',
        OIDC_CLIENT_ID: 'cloudops',
        OIDC_CLIENT_SECRET: OIDC_SECRET,
        PUBLIC_URL: 'https://cloudops.example.com',
        REDIS_URL: env.redisUrl,
        REDIS_PREFIX: env.prefix,
        PORT: '0',
        ROLE: 'worker',
        LOG_LEVEL: 'debug',
        POLICY_FILE: policy,
      },
      dir,
    );
    try {
      await bot.ready();
      // Someone pastes the API key into a request's reason: it is in the request message the worker posts, and the
      // Slack client (src/slack-api) logs that message's body at debug. Only the literal secrets the logger was given
      // catch it.
      const reason = `portal key ${env.sim.apiKey} rotated, seal ${TEST_SEAL_KEY} sso ${OIDC_SECRET}`;
      const request = await env.queueRequest(resizeOf(env, 102, { cores: 6 }, { reason }));
      await waitForReplies(env, request.id, 1, 30_000);
      const lines = () =>
        bot
          .stdout()
          .split('\n')
          .filter((line) => line.trim() !== '');
      await until(
        () => lines().some((line) => line.includes('http request body') && line.includes('portal key')),
        'the request message in a debug line',
        30_000,
      );
      const posted = lines().filter(
        (line) => line.includes('http request body') && line.includes('portal key'),
      );
      for (const line of posted)
        expect(line).toContain('portal key [redacted] rotated, seal [redacted] sso [redacted]');
      for (const secret of [env.sim.apiKey, TEST_SEAL_KEY, OIDC_SECRET])
        expect(lines().filter((line) => line.includes(secret))).toEqual([]);
    } finally {
      bot.kill('SIGKILL');
      await env.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
