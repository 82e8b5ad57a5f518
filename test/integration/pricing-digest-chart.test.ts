import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type CloudSim, startCloudSim } from '../../sim/cloud/server.ts';
import { type SlackStandIn, startSlackStandIn } from '../../sim/slack/server.ts';
import { UploadScope } from '../../src/charts/upload-scope.ts';
import { CloudApiClient, FAST_TIMEOUTS } from '../../src/cloud/client.ts';
import { parsePolicy } from '../../src/config/policy.ts';
import { checkBotToken } from '../../src/doctor/slack.ts';
import { DigestScheduler } from '../../src/jobs/digest-scheduler.ts';
import { createDigestJobs } from '../../src/jobs/digests.ts';
import { CHANNEL_POINTS, CLUSTER_POINTS, PriceHistory } from '../../src/pricing/price-history.ts';
import { digestRenderer } from '../../src/slack/blocks/digest.ts';
import { SlackApi } from '../../src/slack-api/client.ts';
import { checkSlackToken } from '../../src/startup/checks.ts';
import { decodePng, PNG_SIGNATURE, pixelDiff, pngHeader } from '../helpers/png.ts';
import { deleteKeys, testRedis, uniquePrefix } from '../helpers/redis.ts';

const root = resolve(import.meta.dirname, '..', '..');
/** The chart the docs show is the one this test's digest uploads (rewritten with UPDATE_CHART_FIXTURES=1). */
const DOCS_PICTURE = join(root, 'docs', 'pictures', 'digest-chart.png');
const UPDATE = process.env.UPDATE_CHART_FIXTURES === '1';
const DAY = 24 * 3600_000;

const policy = parsePolicy('currency: EUR\nreference_vm: { cores: 2, ram_gb: 4, os_disk_gb: 50 }\n');

let sim: CloudSim;
let standIn: SlackStandIn;
let admin: Redis;
let prefix: string;
let clock: Date;
const closers: (() => Promise<unknown>)[] = [];

/** The digest worker with charts, on the real queue, as the worker role wires it; logs kept in `lines`. */
async function startDigests(options: { scopes?: string[]; chartTimeoutMs?: number } = {}) {
  if (options.scopes) {
    await standIn.close();
    standIn = await startSlackStandIn({ scopes: options.scopes });
  }
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
  const connection = testRedis();
  const cloud = new CloudApiClient({ baseUrl: sim.url, apiKey: sim.apiKey, timeouts: FAST_TIMEOUTS });
  const slack = new SlackApi({ apiUrl: standIn.apiUrl, token: standIn.botToken });
  const scope = new UploadScope(logger);
  const history = new PriceHistory(connection, prefix, policy.retention_days);
  const charts = {
    history,
    slack,
    reference: policy.reference_vm,
    currency: policy.currency,
    scope,
    logger,
    timeoutMs: options.chartTimeoutMs,
  };
  const now = () => clock;
  const jobs = createDigestJobs({
    policy,
    cloud,
    connection,
    prefix,
    slack,
    renderer: digestRenderer,
    history,
    charts,
    now,
    logger,
  });
  const worker = jobs.startWorker();
  const scheduler = new DigestScheduler({ connection, prefix, now, nowIntervalMs: 1 });
  closers.push(
    () => worker.close(),
    () => scheduler.close(),
    () => jobs.close(),
    () => cloud.close(),
    () => slack.close(),
    () => connection.quit(),
  );
  return { scheduler, lines, scope, slack, history };
}

const digestsIn = (channel: string) =>
  standIn.messages(channel).filter((m) => (m.text ?? '').startsWith('Pricing digest') && !m.thread_ts);
const filesIn = (channel: string) => standIn.messages(channel).filter((m) => m.files && m.files.length > 0);

/** Sends one digest at the clock's time and waits for its text (and, when `chart`, its chart). */
async function digestNow(
  scheduler: DigestScheduler,
  channel: string,
  chart: boolean,
): Promise<{ ts: string; fileCount: number }> {
  const before = digestsIn(channel).length;
  const filesBefore = filesIn(channel).length;
  await scheduler.sendNow(channel, 'U0DEV');
  const digest = await standIn.waitFor(() => digestsIn(channel)[before], 30_000);
  if (chart) await standIn.waitFor(() => filesIn(channel).length > filesBefore, 30_000);
  return { ts: digest.ts, fileCount: filesIn(channel).length };
}

beforeEach(async () => {
  prefix = uniquePrefix('charts');
  admin = testRedis();
  clock = new Date('2026-11-20T08:00:00.000Z');
  sim = await startCloudSim();
  standIn = await startSlackStandIn();
});

afterEach(async () => {
  // In the order opened: the worker and the queues before the connection they use.
  for (const close of closers.splice(0)) await close().catch(() => undefined);
  await Promise.all([sim.close(), standIn.close()]);
  await deleteKeys(admin, prefix);
  await admin.quit();
});

describe('a digest carries its price chart', () => {
  it('uploads the chart into the digest thread after the text: getUploadURLExternal, the bytes, completeUploadExternal', async () => {
    const { scheduler } = await startDigests();
    const first = await digestNow(scheduler, 'C0CHART', true);

    const methods = standIn.calls.map((c) => c.method);
    const posted = methods.indexOf('chat.postMessage');
    const asked = methods.indexOf('files.getUploadURLExternal');
    const completed = methods.indexOf('files.completeUploadExternal');
    // Text first, then the upload's two calls in order.
    expect(posted).toBeGreaterThanOrEqual(0);
    expect(asked).toBeGreaterThan(posted);
    expect(completed).toBeGreaterThan(asked);

    const [file] = standIn.files();
    expect(file).toBeDefined();
    if (!file?.bytes) throw new Error('no bytes uploaded');
    expect(file.bytes.subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);
    expect(file.length).toBe(file.bytes.length);
    expect(pngHeader(file.bytes)).toMatchObject({ width: 1200, height: 600 });
    expect(file.filename).toBe('price-history-2026-11-20.png');
    expect(file.channel).toBe('C0CHART');
    expect(file.threadTs).toBe(first.ts);
    expect(file.altText).toMatch(/^Reference VM, monthly cost per cluster in EUR .*Cheapest now: zone-3 at /);

    const complete = standIn.callsOf('files.completeUploadExternal')[0];
    expect(complete?.args).toMatchObject({ channel_id: 'C0CHART', thread_ts: first.ts });
    expect(complete?.args.files).toEqual([
      { id: file.id, title: 'Reference VM cost per cluster, 20 Nov 2026' },
    ]);
    // Every call and its arguments checked against Slack's method files by the stand-in.
    expect(standIn.problems).toEqual([]);
  });

  it('draws the channel’s past digests: a price change shows on the next chart (the picture in docs/)', async () => {
    const { scheduler, history } = await startDigests();
    await digestNow(scheduler, 'C0HIST', true);
    const changes: [string, string, string][] = [
      ['zone-2', 'ram', '0.0043'],
      ['zone-1', 'vcore_regular', '0.0126'],
      ['zone-3', 'ram', '0.0041'],
    ];
    for (let day = 1; day <= 5; day++) {
      clock = new Date(clock.getTime() + DAY);
      const change = changes[day - 2];
      if (change) sim.setPrice(...change);
      await digestNow(scheduler, 'C0HIST', true);
    }
    const points = await history.channelPoints('C0HIST', '2c-4g-50d-regular-ip');
    expect(points.map((p) => p.at.slice(0, 10))).toEqual([
      '2026-11-20',
      '2026-11-21',
      '2026-11-22',
      '2026-11-23',
      '2026-11-24',
      '2026-11-25',
    ]);
    const files = standIn.files();
    const last = files.at(-1);
    if (!last?.bytes) throw new Error('no chart');
    // zone-3's RAM went up at the fifth digest; at the sixth, nothing changed.
    const fourth = files[4];
    expect(fourth?.altText).toMatch(/Latest changes: zone-3 up [0-9.]+% from [0-9.]+ to [0-9.]+\./);
    expect(last.altText).toContain('No change since the previous point.');
    if (UPDATE || !existsSync(DOCS_PICTURE)) {
      mkdirSync(dirname(DOCS_PICTURE), { recursive: true });
      writeFileSync(DOCS_PICTURE, fourth?.bytes ?? last.bytes);
    }
    // The picture in the docs is this test's chart of the fourth digest.
    const shown = decodePng(readFileSync(DOCS_PICTURE));
    expect(pixelDiff(decodePng(fourth?.bytes ?? last.bytes), shown).count).toBeLessThan(150);
    expect(standIn.problems).toEqual([]);
  });

  it('keeps a bounded history per channel', async () => {
    const { history } = await startDigests();
    for (let i = 0; i < CHANNEL_POINTS + 5; i++) {
      await history.recordDigest('C0BOUND', {
        at: new Date(Date.UTC(2026, 0, 1 + i)).toISOString(),
        ref: 'r',
        costs: { a: String(i) },
      });
    }
    const points = await history.channelPoints('C0BOUND', 'r');
    expect(points).toHaveLength(CHANNEL_POINTS);
    expect(points.at(-1)?.costs.a).toBe(String(CHANNEL_POINTS + 4));
    const ttl = await admin.ttl(history.channelKey('C0BOUND'));
    expect(ttl).toBeGreaterThan((policy.retention_days - 1) * 86_400);
    // A cluster's history keeps only its changes, and at most CLUSTER_POINTS of them.
    expect(await history.clusterPoints('a', 'r')).toHaveLength(CHANNEL_POINTS + 5);
    await history.recordClusters({
      at: '2027-01-01T00:00:00.000Z',
      ref: 'r',
      costs: { a: String(CHANNEL_POINTS + 4) },
    });
    expect(await history.clusterPoints('a', 'r')).toHaveLength(CHANNEL_POINTS + 5);
    for (let i = 0; i < CLUSTER_POINTS; i++) {
      const at = `2027-02-${String(i + 1).padStart(2, '0')}T00:00:00.000Z`;
      await history.recordClusters({ at, ref: 'r', costs: { a: `x${i}` } });
    }
    const kept = await history.clusterPoints('a', 'r');
    expect(kept).toHaveLength(CLUSTER_POINTS);
    expect(kept.at(-1)).toEqual({
      at: '2027-02-24T00:00:00.000Z',
      ref: 'r',
      costs: { a: `x${CLUSTER_POINTS - 1}` },
    });
    expect(await admin.ttl(history.clustersKey())).toBeGreaterThan(0);
  });
});

describe('without files:write the digest goes out without its picture', () => {
  it('posts the text, gets missing_scope once, says so once, and tries no upload for the next digest', async () => {
    const { scheduler, lines } = await startDigests({
      scopes: ['commands', 'chat:write', 'usergroups:read'],
    });
    await digestNow(scheduler, 'C0NOSCOPE', false);
    await standIn.waitFor(() => standIn.callsOf('files.getUploadURLExternal').length === 1, 30_000);
    expect(standIn.callsOf('files.getUploadURLExternal')[0]?.response).toMatchObject({
      ok: false,
      error: 'missing_scope',
    });
    clock = new Date(clock.getTime() + DAY);
    const second = await digestNow(scheduler, 'C0NOSCOPE', false);
    // The second digest compared with the first: its snapshot was saved, so the first digest was complete.
    expect(JSON.stringify(standIn.messages('C0NOSCOPE').find((m) => m.ts === second.ts)?.blocks)).toContain(
      'No changes since the last digest',
    );
    await new Promise((r) => setTimeout(r, 300));
    expect(standIn.callsOf('files.getUploadURLExternal')).toHaveLength(1);
    expect(filesIn('C0NOSCOPE')).toEqual([]);
    expect(lines.filter((l) => l.includes('charts off')).length).toBe(1);
    expect(standIn.problems).toEqual([]);
  });

  it('start-up reads the token’s scopes from auth.test (x-oauth-scopes), so it can say so before any digest', async () => {
    await standIn.close();
    standIn = await startSlackStandIn({ scopes: ['commands', 'chat:write'] });
    const check = await checkSlackToken(standIn.botToken, standIn.apiUrl, 3000);
    expect(check).toEqual({ ok: true, scopes: ['commands', 'chat:write'] });
    const lines: string[] = [];
    const scope = new UploadScope(pino({ level: 'info' }, { write: (l: string) => void lines.push(l) }));
    scope.missing('start-up');
    scope.missing('upload');
    expect(scope.usable).toBe(false);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('files:write');
  });
});

describe('cloudops doctor and files:write', () => {
  it('warns (does not fail) when only files:write is missing, naming what stops', async () => {
    await standIn.close();
    standIn = await startSlackStandIn({
      scopes: ['commands', 'chat:write', 'usergroups:read', 'channels:history', 'groups:history'],
    });
    const { results } = await checkBotToken(standIn.apiUrl, standIn.botToken, 3000);
    const scopes = results.find((r) => r.id === 'slack.scopes');
    expect(scopes?.status).toBe('warn');
    expect(scopes?.summary).toMatch(/^bot scopes missing: files:write, for the price chart/);
  });

  it('still fails when a scope the bot needs is missing too', async () => {
    await standIn.close();
    standIn = await startSlackStandIn({ scopes: ['commands', 'usergroups:read'] });
    const { results } = await checkBotToken(standIn.apiUrl, standIn.botToken, 3000);
    const scopes = results.find((r) => r.id === 'slack.scopes');
    expect(scopes?.status).toBe('fail');
    expect(scopes?.summary).toContain('chat:write');
    expect(scopes?.summary).toContain('files:write');
  });
});

describe('a failed upload never loses or delays the digest', () => {
  it('a Slack 500 on completeUploadExternal: the digest is complete, the next one too', async () => {
    const { scheduler, lines } = await startDigests();
    standIn.failNext('files.completeUploadExternal', { status: 500 });
    await digestNow(scheduler, 'C0FAIL', false);
    await standIn.waitFor(() => standIn.callsOf('files.completeUploadExternal').length === 1, 30_000);
    await standIn.waitFor(() => lines.some((l) => l.includes('chart: not posted')), 30_000);
    clock = new Date(clock.getTime() + DAY);
    const second = await digestNow(scheduler, 'C0FAIL', true);
    expect(JSON.stringify(standIn.messages('C0FAIL').find((m) => m.ts === second.ts)?.blocks)).toContain(
      'No changes since the last digest',
    );
    expect(digestsIn('C0FAIL')).toHaveLength(2);
  });

  it('a 429 on the upload: the chart waits Retry-After and is posted then, the digest was out before', async () => {
    const { scheduler } = await startDigests();
    standIn.failNext('files.getUploadURLExternal', { status: 429, retryAfter: 1 });
    await digestNow(scheduler, 'C0LIMIT', false);
    const limitedAt = await standIn.waitFor(
      () =>
        standIn
          .callsOf('files.getUploadURLExternal')
          .find((c) => c.status === 429)
          ?.at.getTime(),
      30_000,
    );
    await standIn.waitFor(() => filesIn('C0LIMIT').length === 1, 30_000);
    const retriedAt = standIn
      .callsOf('files.getUploadURLExternal')
      .find((c) => c.status === 200)
      ?.at.getTime();
    expect((retriedAt ?? 0) - limitedAt).toBeGreaterThanOrEqual(900);
    expect(standIn.problems).toEqual([]);
  });

  it('an upload URL that does not answer: the upload gives up at its deadline, the text was out before', async () => {
    const { scheduler } = await startDigests({ chartTimeoutMs: 300 });
    standIn.holdAnswer('files.getUploadURLExternal', 3000);
    await digestNow(scheduler, 'C0SLOW', false);
    // The upload URL is answered after 3 s: an upload that waited for it would have shared the file. The text does
    // not wait for the chart: it is posted before the upload starts.
    expect(standIn.messages('C0SLOW').length).toBeGreaterThan(0);
    expect(filesIn('C0SLOW')).toEqual([]);
  });
});
