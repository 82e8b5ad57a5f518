import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CloudSim, startCloudSim } from '../../sim/cloud/server.ts';
import { type SlackStandIn, startSlackStandIn } from '../../sim/slack/server.ts';
import { type BotProcess, spawnBot } from '../helpers/bot-process.ts';
import { OPS, OPS_POLICY } from '../helpers/ops-bot.ts';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '../helpers/otlp-receiver.ts';
import { type ForwardProxy, startForwardProxy } from '../helpers/proxies.ts';
import { deleteKeys, testRedisUrl, uniquePrefix } from '../helpers/redis.ts';
import { TEST_SEAL_KEY } from '../helpers/seal.ts';
import {
  blockActionsPayload,
  interactionBody,
  postSigned,
  slashCommandBody,
  viewState,
  viewSubmissionPayload,
} from '../helpers/slack-request.ts';

const RECORD_MODULES = fileURLToPath(new URL('../fixtures/record-modules.mjs', import.meta.url));

/** The cloud sim, the Slack stand-in and a policy file: what the bot process runs against. */
interface Stage {
  sim: CloudSim;
  slack: SlackStandIn;
  dir: string;
  prefix: string;
  secrets: { botToken: string; signingSecret: string; apiKey: string };
  close(): Promise<void>;
}

async function startStage(policy = OPS_POLICY): Promise<Stage> {
  const secrets = {
    botToken: `xoxb-trace-${randomBytes(12).toString('hex')}`,
    signingSecret: randomBytes(20).toString('hex'),
    apiKey: `ck_${randomBytes(16).toString('hex')}`,
  };
  const sim = await startCloudSim({ apiKey: secrets.apiKey });
  const slack = await startSlackStandIn({
    botToken: secrets.botToken,
    teamId: OPS.team,
    appToken: `xapp-1-A0TRACE-${randomBytes(8).toString('hex')}`,
  });
  const dir = await mkdtemp(join(tmpdir(), 'cloudops-tracing-'));
  await writeFile(join(dir, 'policy.yml'), policy);
  const prefix = uniquePrefix('trace');
  return {
    sim,
    slack,
    dir,
    prefix,
    secrets,
    async close() {
      const redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: 1 });
      await deleteKeys(redis, prefix).catch(() => undefined);
      redis.disconnect();
      await Promise.all([sim.close(), slack.close()]);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** `npm start` in its own process on the stage, in HTTP mode, with `extra` variables (the OTEL_* ones). */
function startBot(stage: Stage, extra: Record<string, string>): BotProcess {
  return spawnBot(
    {
      SLACK_BOT_TOKEN: stage.secrets.botToken,
      SLACK_SIGNING_SECRET: stage.secrets.signingSecret,
      SLACK_API_URL: stage.slack.apiUrl,
      CLOUD_API_URL: stage.sim.url,
      CLOUD_API_KEY: stage.secrets.apiKey,
      SEAL_KEY: TEST_SEAL_KEY,
      REDIS_URL: testRedisUrl(),
      REDIS_PREFIX: stage.prefix,
      PORT: '0',
      LOG_LEVEL: 'debug',
      POLICY_FILE: join(stage.dir, 'policy.yml'),
      ...extra,
    },
    stage.dir,
  );
}

/** How Slack reaches the bot: signed HTTP to its port, or envelopes over the Socket Mode stand-in. */
type Transport = { mode: 'http'; port: number } | { mode: 'socket' };

/** Sends a command or an interaction (the form body Slack would post) over `transport`. */
function sender(stage: Stage, transport: Transport) {
  return async (body: string): Promise<{ status: number; json?: unknown }> => {
    if (transport.mode === 'http')
      return postSigned(`http://127.0.0.1:${transport.port}/slack/events`, body, {
        secret: stage.secrets.signingSecret,
      });
    const fields = Object.fromEntries(new URLSearchParams(body));
    const ack = fields.payload
      ? await stage.slack.socket.deliver('interactive', JSON.parse(fields.payload) as Record<string, unknown>)
      : await stage.slack.socket.deliver('slash_commands', fields);
    return { status: 200, json: ack.payload };
  };
}

/** `/cloud resize` and the modal submitted, as the requester does it; resolves with the request message posted. */
async function requestResize(stage: Stage, transport: Transport, cores: number) {
  const { slack } = stage;
  const send = sender(stage, transport);
  const opened = slack.views.length;
  const command = slashCommandBody(
    { user: OPS.dev, channel: OPS.channel, teamId: OPS.team },
    {
      text: `resize shop-prod 102 cores=${cores}`,
      triggerId: slack.triggerId(),
      responseUrl: slack.responseUrl({ channel: OPS.channel, user: OPS.dev }),
    },
  );
  expect((await send(command)).status).toBe(200);
  const view = await slack.waitFor(() => slack.views.slice(opened).find((v) => v.method === 'views.open'));
  const posts = slack.messages(OPS.channel).length;
  const submit = viewSubmissionPayload(
    { user: OPS.dev, channel: OPS.channel, teamId: OPS.team },
    view.view,
    viewState(view.view, { reason: 'traced resize' }),
    slack.triggerId(),
  );
  expect((await send(interactionBody(submit))).json).toEqual({ response_action: 'clear' });
  const posted = await slack.waitFor(
    () =>
      slack
        .messages(OPS.channel)
        .slice(posts)
        .find((m) => m.thread_ts === undefined && /\(request [^)]+\)/.test(m.text ?? '')),
    15_000,
  );
  return { requestId: /\(request ([^)]+)\)/.exec(posted.text ?? '')![1]!, posted };
}

/**
 * One resize as people make it: `/cloud resize`, the modal submitted, the lead's approve click; resolves when the
 * thread says it is done, with the request id and how long the click took to reach the API.
 */
async function approvedResize(stage: Stage, transport: Transport, cores: number) {
  const { slack, sim } = stage;
  const send = sender(stage, transport);
  const { requestId, posted } = await requestResize(stage, transport, cores);
  const applied = sim.applied.length;
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
  const clickedAt = performance.now();
  expect((await send(interactionBody(approve))).status).toBe(200);
  await slack.waitFor(() => (sim.applied.length > applied ? true : undefined), 30_000);
  const clickToApiMs = performance.now() - clickedAt;
  const reply = await slack.waitFor(
    () => slack.thread(OPS.channel, posted.ts).find((m) => /resized|succeeded|done/i.test(m.text ?? '')),
    30_000,
  );
  return { requestId, reply, clickToApiMs };
}

/** Polls `read` until it returns something other than undefined. */
async function until<T>(read: () => T | undefined, what: string, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The spans from `span` up to its trace's first one. */
function ancestors(spans: ReceivedSpan[], span: ReceivedSpan): ReceivedSpan[] {
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const out: ReceivedSpan[] = [];
  for (let at = span.parentSpanId ? byId.get(span.parentSpanId) : undefined; at; ) {
    out.push(at);
    at = at.parentSpanId ? byId.get(at.parentSpanId) : undefined;
  }
  return out;
}

/** A counter's value on the bot's /metrics, summed over the series whose labels include `labels`. */
async function metric(metricsPort: number, name: string, labels = ''): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  return text
    .split('\n')
    .filter((line) => line.startsWith(name) && line.includes(labels))
    .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
}

function metricsPortOf(bot: BotProcess): number {
  const line = bot
    .stdout()
    .split('\n')
    .find((l) => l.includes('"msg":"cloudops ready"'));
  return (JSON.parse(line!) as { metricsPort: number }).metricsPort;
}

function logLines(bot: BotProcess): Record<string, unknown>[] {
  return bot
    .stdout()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('tracing to an OTLP/HTTP collector', { timeout: 120_000 }, () => {
  let stage: Stage;
  let receiver: OtlpReceiver;
  let bot: BotProcess;
  beforeAll(async () => {
    stage = await startStage();
    receiver = await startOtlpReceiver();
  });
  afterAll(async () => {
    bot?.kill('SIGKILL');
    await receiver?.close();
    await stage?.close();
  });

  it('one approved resize is one trace: the approve click, the decision, the execute job, the POST, the reply', async () => {
    bot = startBot(stage, {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
      OTEL_SERVICE_NAME: 'cloudops-test',
    });
    const port = await bot.ready();
    const { requestId, reply } = await approvedResize(stage, { mode: 'http', port }, 6);

    const spans = () => receiver.spans();
    const post = await until(
      () =>
        spans().find(
          (s) => s.name.startsWith('POST ') && String(s.attributes['url.path']).includes('/vm/102/upgrade/'),
        ),
      'the POST span',
    );
    const trace = () => spans().filter((s) => s.traceId === post.traceId);
    // The reply's chat.postMessage is found by the request id alone: the request message's post is the other one.
    const posts = () =>
      spans().filter(
        (s) => s.name === 'chat.postMessage' && s.attributes['cloudops.request_id'] === requestId,
      );
    await until(() => (posts().length >= 2 ? true : undefined), 'the request message and the reply posts');
    // The reply that says how the resize went is posted by a notify job the execute job enqueued.
    const replySpan = await until(
      () => posts().find((s) => ancestors(spans(), s).some((a) => a.name === 'process execute')),
      'the chat.postMessage of the result’s reply',
    );
    expect(replySpan.traceId).toBe(post.traceId);
    expect(replySpan.kind).toBe(3); // CLIENT
    const click = trace().find((s) => s.name === 'slack block_actions approve');
    expect(click, 'the approve click in the POST’s trace').toBeDefined();
    expect(click!.parentSpanId).toBeUndefined();
    expect(click!.kind).toBe(2); // SERVER
    expect(click!.attributes).toMatchObject({
      'cloudops.request_id': requestId,
      'slack.type': 'block_actions',
    });
    const decision = trace().find((s) => s.name === 'cloudops.request.approve');
    expect(decision?.parentSpanId).toBe(click!.spanId);
    expect(decision?.attributes).toMatchObject({
      'cloudops.decision': 'ok',
      'cloudops.request_id': requestId,
    });

    // The POST runs in the execute job, whose parent chain reaches the click (once every span of it is exported).
    const chain = await until(() => {
      const up = ancestors(trace(), post);
      return up.at(-1)?.parentSpanId === undefined && up.length > 0 ? up : undefined;
    }, 'the POST’s whole parent chain');
    const job = chain.find((s) => s.name === 'process execute');
    expect(job, `execute job among ${chain.map((s) => s.name).join(' < ')}`).toBeDefined();
    expect(chain.at(-1)?.spanId).toBe(click!.spanId);
    expect(chain.some((s) => s.name === 'add execute.execute')).toBe(true);
    expect(post.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.response.status_code': 200,
      'cloudops.operation': 'resize',
      'cloudops.request_id': requestId,
    });
    expect(post.kind).toBe(3);
    expect(post.service).toBe('cloudops-test');
    expect(job!.attributes['cloudops.request_id']).toBe(requestId);
    // The thread reply is part of the same request's life: tagged, and in this trace through the notify job.
    expect(reply.text).toBeTruthy();
    expect(ancestors(trace(), replySpan)[0]?.name).toBe('process notify');

    // Log lines written inside a span carry its ids. A line is written at once and its span leaves in a later batch
    // (on a loaded machine the report job's chat.update line was read before its span had arrived): wait for them.
    const traced = logLines(bot).filter((line) => line.trace_id === post.traceId);
    expect(traced.length).toBeGreaterThan(0);
    const arrived = () => new Set(trace().map((s) => s.spanId));
    await until(
      () => (traced.every((line) => arrived().has(String(line.span_id))) ? true : undefined),
      'the span of every traced log line',
    ).catch(() => undefined);
    const ids = arrived();
    for (const line of traced) expect(ids.has(String(line.span_id)), JSON.stringify(line)).toBe(true);

    // No secret in any span: not the API key, not the bot token, not the signing secret.
    for (const body of receiver.bodies()) {
      for (const secret of Object.values(stage.secrets)) expect(body.includes(secret)).toBe(false);
    }
    // Captured for docs/tracing.md's picture: the trace of this request, as received.
    if (process.env.CLOUDOPS_TRACE_CAPTURE) {
      const captured = trace().map((s) => ({ ...s, startNs: String(s.startNs), endNs: String(s.endNs) }));
      await writeFile(process.env.CLOUDOPS_TRACE_CAPTURE, `${JSON.stringify(captured, null, 1)}\n`);
    }
  });

  it('/cloud cluster spans name the route: what was typed after the command is no span name, path or attribute', async () => {
    // Runs on the first case's bot, or on its own when picked alone.
    bot ??= startBot(stage, {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    });
    const port = await bot.ready();
    const send = sender(stage, { mode: 'http', port });
    // A Slack-token-shaped name fits the command's [A-Za-z0-9._-]{1,64}: typed by mistake, it must not be exported.
    const typed = `xoxp-${randomBytes(10).toString('hex')}`;
    for (const name of [typed, 'zone-1']) {
      const command = slashCommandBody(
        { user: OPS.dev, channel: OPS.channel, teamId: OPS.team },
        {
          text: `cluster ${name}`,
          triggerId: stage.slack.triggerId(),
          responseUrl: stage.slack.responseUrl({ channel: OPS.channel, user: OPS.dev }),
        },
      );
      expect((await send(command)).status).toBe(200);
    }
    // The command asks the A shape first (/api/cloud/cluster/…), then the B shape where A is not served.
    const route = /^GET (\/api)?\/cloud\/cluster\/\{name\}\/$/;
    const gets = await until(() => {
      const found = receiver.spans().filter((s) => route.test(s.name));
      return found.length >= 2 ? found : undefined;
    }, 'a GET …/cluster/{name}/ span for each name');
    for (const span of gets) expect(span.name).toBe(`GET ${span.attributes['url.path']}`);
    // The cluster the API knows is named on its span; the unknown one nowhere.
    expect(gets.map((s) => s.attributes['cloudops.cluster'])).toContain('zone-1');
    for (const body of receiver.bodies()) expect(body.includes(typed)).toBe(false);
  });
});

describe('tracing over Socket Mode', { timeout: 120_000 }, () => {
  let stage: Stage;
  let receiver: OtlpReceiver;
  let bot: BotProcess;
  beforeAll(async () => {
    stage = await startStage();
    receiver = await startOtlpReceiver();
  });
  afterAll(async () => {
    bot?.kill('SIGKILL');
    await receiver?.close();
    await stage?.close();
  });

  it('a click delivered over the socket is the first span of its trace too, down to the POST', async () => {
    bot = startBot(stage, {
      SLACK_APP_TOKEN: stage.slack.socket.appToken,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    });
    await bot.ready();
    const { requestId } = await approvedResize(stage, { mode: 'socket' }, 6);
    const spans = () => receiver.spans();
    const post = await until(
      () =>
        spans().find((s) => s.name.startsWith('POST ') && s.attributes['cloudops.request_id'] === requestId),
      'the POST span',
    );
    const chain = await until(() => {
      const up = ancestors(spans(), post);
      return up.at(-1)?.parentSpanId === undefined && up.length > 0 ? up : undefined;
    }, 'the POST’s whole parent chain');
    expect(chain.map((s) => s.name)).toEqual([
      'process execute',
      'add execute.execute',
      'cloudops.request.approve',
      'slack block_actions approve',
    ]);
    expect(chain.at(-1)?.attributes['cloudops.request_id']).toBe(requestId);
    // The command and the submission were traced too, each a trace of its own.
    for (const name of ['slack /cloud', 'slack view_submission resize'])
      expect(
        spans().some((s) => s.name === name && s.parentSpanId === undefined),
        name,
      ).toBe(true);
  });
});

describe('through a forward proxy', { timeout: 120_000 }, () => {
  let stage: Stage;
  let receiver: OtlpReceiver;
  let proxy: ForwardProxy;
  let bot: BotProcess;
  const closers: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    stage = await startStage();
    receiver = await startOtlpReceiver();
    proxy = await startForwardProxy();
  });
  afterAll(async () => {
    bot?.kill('SIGKILL');
    for (const close of closers) await close();
    await proxy?.close();
    await receiver?.close();
    await stage?.close();
  });

  it('a resize over Socket Mode sends the Web API, the WebSocket, the cloud API, the OTLP and the audit export through it', async () => {
    // The company's log system: it takes every audit batch.
    const batches: string[] = [];
    const audit = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => {
        body += chunk.toString();
      });
      req.on('end', () => {
        batches.push(body);
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => audit.listen(0, '127.0.0.1', resolve));
    const auditUrl = `http://127.0.0.1:${(audit.address() as AddressInfo).port}/audit`;
    closers.push(() => new Promise<void>((resolve) => audit.close(() => resolve())));
    // Lower case for one, upper for the other: both spellings are read. Everything is on 127.0.0.1, which is only
    // reached through the proxy because nothing here bypasses loopback by itself.
    bot = startBot(stage, {
      SLACK_APP_TOKEN: stage.slack.socket.appToken,
      http_proxy: proxy.url,
      HTTPS_PROXY: proxy.url,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
      AUDIT_WEBHOOK_URL: auditUrl,
    });
    await bot.ready();
    const { requestId } = await approvedResize(stage, { mode: 'socket' }, 6);
    await until(
      () =>
        receiver.spans().some((s) => s.attributes['cloudops.request_id'] === requestId) ? true : undefined,
      'the spans of the resize at the collector',
    );
    await until(
      () => (batches.some((b) => b.includes(requestId)) ? true : undefined),
      'the resize’s audit entries',
    );
    const seen = (kind: string, path: string) =>
      proxy.calls.some((c) => c.kind === kind && new URL(c.target).pathname.endsWith(path));
    const slack = new URL(stage.slack.apiUrl).pathname;
    expect(seen('forward', `${slack}auth.test`), 'auth.test').toBe(true);
    expect(seen('forward', `${slack}apps.connections.open`), 'apps.connections.open').toBe(true);
    expect(seen('forward', `${slack}chat.postMessage`), 'chat.postMessage').toBe(true);
    expect(seen('forward', `${slack}views.open`), 'views.open').toBe(true);
    expect(
      proxy.calls.some(
        (c) => c.kind === 'upgrade' && new URL(c.target).port === new URL(stage.slack.apiUrl).port,
      ),
      'the Socket Mode WebSocket',
    ).toBe(true);
    expect(seen('forward', '/cloud/cluster/'), 'the start-up cloud check').toBe(true);
    expect(seen('forward', '/vm/102/upgrade/'), 'the resize POST').toBe(true);
    expect(seen('forward', '/v1/traces'), 'the OTLP export').toBe(true);
    expect(seen('forward', '/audit'), 'the audit export').toBe(true);
    // Every call the cloud simulator answered came through the proxy: none went around it.
    const cloudCalls = proxy.calls.filter((c) => c.kind === 'forward' && c.target.startsWith(stage.sim.url));
    expect(stage.sim.calls.length).toBeGreaterThan(0);
    expect(cloudCalls.length).toBeGreaterThanOrEqual(stage.sim.calls.length);
  });
});

describe('later work of a request', { timeout: 120_000 }, () => {
  let stage: Stage;
  let receiver: OtlpReceiver;
  let bot: BotProcess;
  beforeAll(async () => {
    // A reminder 3.6 s after the request is made (the scheduler looks every 5 s).
    stage = await startStage(`${OPS_POLICY}approvals:\n  remind_after_hours: 0.001\n`);
    receiver = await startOtlpReceiver();
  });
  afterAll(async () => {
    bot?.kill('SIGKILL');
    await receiver?.close();
    await stage?.close();
  });

  it('a reminder is a trace of its own, found by the same request id as the submission that made the request', async () => {
    bot = startBot(stage, {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    });
    const port = await bot.ready();
    const { requestId, posted } = await requestResize(stage, { mode: 'http', port }, 6);
    await stage.slack.waitFor(
      () => stage.slack.thread(OPS.channel, posted.ts).find((m) => /^Reminder:/.test(m.text ?? '')),
      30_000,
    );
    const ofRequest = () => receiver.spans().filter((s) => s.attributes['cloudops.request_id'] === requestId);
    const remind = await until(
      () => ofRequest().find((s) => s.name === 'cloudops.request.remind'),
      'the reminder span',
    );
    const submission = ofRequest().find((s) => s.name === 'slack view_submission resize');
    expect(submission, 'the submission’s span, tagged once the request existed').toBeDefined();
    expect(submission?.parentSpanId).toBeUndefined();
    expect(ofRequest().some((s) => s.name === 'cloudops.request.createResize')).toBe(true);
    // The reminder starts its own trace (nothing of Slack's started it), and its reply is part of it.
    expect(remind.parentSpanId).toBeUndefined();
    expect(remind.traceId).not.toBe(submission?.traceId);
    // Its thread reply is posted by a notify job it enqueued, in its trace.
    const chain = await until(() => {
      const reply = ofRequest().find((s) => s.name === 'chat.postMessage' && s.traceId === remind.traceId);
      const up = reply ? ancestors(receiver.spans(), reply) : [];
      return up.at(-1)?.parentSpanId === undefined && up.length > 0 ? up : undefined;
    }, 'the reminder’s chat.postMessage and its parents');
    expect(chain.map((s) => s.name)).toEqual([
      'process notify',
      'add notify.report',
      'cloudops.request.remind',
    ]);
  });
});

describe('a collector that accepts connections and never answers', { timeout: 120_000 }, () => {
  let stage: Stage;
  let receiver: OtlpReceiver;
  let bot: BotProcess;
  beforeAll(async () => {
    stage = await startStage();
    receiver = await startOtlpReceiver({ hang: true });
  });
  afterAll(async () => {
    bot?.kill('SIGKILL');
    await receiver?.close();
    await stage?.close();
  });

  it('changes no outcome, drops what it cannot queue (counted), and does not hold up the stop', async () => {
    bot = startBot(stage, {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_TIMEOUT: '1000',
      OTEL_BSP_SCHEDULE_DELAY: '50',
      // A small queue, so spans pile up past it while an export hangs.
      OTEL_BSP_MAX_QUEUE_SIZE: '8',
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '4',
    });
    const port = await bot.ready();
    for (const cores of [6, 8]) {
      const { requestId, reply } = await approvedResize(stage, { mode: 'http', port }, cores);
      expect(reply.text, requestId).toMatch(/resized|succeeded|done/i);
    }
    expect(stage.sim.applied.map((a) => a.vmid)).toEqual([102, 102]);
    expect(receiver.posts()).toBeGreaterThan(0);
    const metricsPort = metricsPortOf(bot);
    const dropped = async (reason: string) =>
      metric(metricsPort, 'cloudops_trace_spans_dropped_total', `reason="${reason}"`);
    const deadline = Date.now() + 30_000;
    while ((await dropped('queue_full')) === 0 || (await dropped('export_failed')) === 0) {
      if (Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(await dropped('queue_full')).toBeGreaterThan(0);
    expect(await dropped('export_failed')).toBeGreaterThan(0);
    // The stop gives the stuck export what is left of the shutdown deadline (20 s), no more, and exits cleanly:
    // an export the stop waited for would never end, and neither would this test.
    bot.kill('SIGTERM');
    const exit = await bot.ends();
    expect(exit.code).toBe(0);
  });
});

describe('a collector that answers 200, then trickles its body a byte at a time', {
  timeout: 120_000,
}, () => {
  let stage: Stage;
  let receiver: OtlpReceiver;
  let bot: BotProcess;
  beforeAll(async () => {
    stage = await startStage();
    receiver = await startOtlpReceiver({ trickle: true });
  });
  afterAll(async () => {
    bot?.kill('SIGKILL');
    await receiver?.close();
    await stage?.close();
  });

  it('each export ends at its total deadline and closes its connection; the stop is not held up', async () => {
    bot = startBot(stage, {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_TIMEOUT: '1000',
      OTEL_BSP_SCHEDULE_DELAY: '50',
    });
    const port = await bot.ready();
    for (const cores of [6, 8]) {
      const { requestId, reply } = await approvedResize(stage, { mode: 'http', port }, cores);
      expect(reply.text, requestId).toMatch(/resized|succeeded|done/i);
    }
    await until(() => (receiver.posts() >= 2 ? true : undefined), 'two exports', 30_000);
    // An idle timeout that each byte resets would keep every one of them open, with its spans, forever.
    await until(() => (receiver.open() <= 1 ? true : undefined), 'the trickling exports closed', 30_000);
    bot.kill('SIGTERM');
    expect((await bot.ends()).code).toBe(0);
  });
});

describe('without OTEL_* variables', { timeout: 120_000 }, () => {
  let stage: Stage;
  let receiver: OtlpReceiver;
  beforeAll(async () => {
    stage = await startStage();
    receiver = await startOtlpReceiver();
  });
  afterAll(async () => {
    await receiver?.close();
    await stage?.close();
  });

  // An endpoint set but the exporter turned off: still nothing loaded, nothing sent.
  it.each([
    ['no OTEL_* variable', () => ({})],
    [
      'OTEL_TRACES_EXPORTER=none beside an endpoint',
      () => ({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_TRACES_EXPORTER: 'none' }),
    ],
  ] as [string, () => Record<string, string>][])(
    '%s: loads no OpenTelemetry SDK module and sends nothing',
    async (_case, variables) => {
      const extra = variables();
      const record = join(stage.dir, `modules-${Object.keys(extra).length}.txt`);
      const bot = startBot(stage, {
        ...extra,
        NODE_OPTIONS: `--import=${RECORD_MODULES}`,
        RECORD_MODULES_FILE: record,
      });
      try {
        const port = await bot.ready();
        await approvedResize(stage, { mode: 'http', port }, 6 + Object.keys(extra).length * 2);
      } finally {
        bot.kill('SIGTERM');
        await bot.ends();
      }
      const loaded = (await readFile(record, 'utf8')).split('\n');
      expect(loaded).toContain('bullmq');
      // prom-client's process metrics import the API package (a no-op without an SDK); nothing else of OpenTelemetry.
      expect(loaded.filter((name) => name.includes('opentelemetry'))).toEqual(['@opentelemetry/api']);
      expect(loaded).not.toContain('bullmq-otel');
      const lines = logLines(bot);
      expect(lines.length).toBeGreaterThan(10);
      expect(lines.some((line) => 'trace_id' in line)).toBe(false);
      expect(receiver.posts()).toBe(0);
    },
  );
});

describe('the standard samplers (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG)', { timeout: 120_000 }, () => {
  let stage: Stage;
  let receiver: OtlpReceiver;
  beforeAll(async () => {
    stage = await startStage();
    receiver = await startOtlpReceiver();
  });
  afterAll(async () => {
    await receiver?.close();
    await stage?.close();
  });

  it.each([
    [{ OTEL_TRACES_SAMPLER: 'always_off' }, 6],
    [{ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' }, 8],
  ])(
    '%o: an approved resize runs, and no span is exported, also when the bot stops',
    async (sampler, cores) => {
      const bot = startBot(stage, {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '50',
        ...sampler,
      });
      try {
        const port = await bot.ready();
        const before = stage.sim.applied.length;
        const { requestId, reply } = await approvedResize(stage, { mode: 'http', port }, cores);
        expect(reply.text, requestId).toMatch(/resized|succeeded|done/i);
        expect(stage.sim.applied.length).toBe(before + 1);
        // The stop flushes whatever the batch holds: with nothing sampled, nothing reaches the collector.
        bot.kill('SIGTERM');
        expect((await bot.ends()).code).toBe(0);
        expect(receiver.spans()).toEqual([]);
      } finally {
        bot.kill('SIGKILL');
      }
    },
  );
});
