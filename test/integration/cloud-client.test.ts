import { request } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type CloudSim, SIM_REASONS, startCloudSim } from '../../sim/cloud/server.ts';
import { type CallReport, CloudApiClient, FAST_TIMEOUTS } from '../../src/cloud/client.ts';
import {
  CloudInputError,
  CloudOutcomeUnknownError,
  CloudProtocolError,
  CloudRateLimitedError,
  CloudRefusedError,
  CloudUnavailableError,
  isSurelyNotApplied,
} from '../../src/cloud/errors.ts';
import type { ResizeBody } from '../../src/cloud/types.ts';
import { startRefusingProxy } from '../helpers/proxies.ts';

const PROJECT = '0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10';
const HOUR = 3_600_000;

let sim: CloudSim;
let client: CloudApiClient;
let reports: CallReport[];

beforeEach(async () => {
  sim = await startCloudSim();
  reports = [];
  client = new CloudApiClient({
    baseUrl: sim.url,
    apiKey: sim.apiKey,
    timeouts: FAST_TIMEOUTS,
    onCall: (call) => reports.push(call),
  });
});

afterEach(async () => {
  await client.close();
  await sim.close();
});

/** The rejection of `promise`, asserted to be an instance of `type`. */
async function failure<T extends Error>(
  promise: Promise<unknown>,
  type: abstract new (...args: never[]) => T,
): Promise<T> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(type);
  return error as T;
}

describe('reads', () => {
  it('lists the active clusters as Shape B, without sending the API key', async () => {
    const clusters = await client.listClusters();
    expect(clusters.map((c) => c.name)).toEqual(['zone-1', 'zone-2', 'zone-3']);
    expect(clusters.every((c) => c.shape === 'B')).toBe(true);
    expect(clusters[0]?.prices.vcoreRegular).toBe('0.0120');
    const zone3 = clusters.find((c) => c.name === 'zone-3');
    expect(zone3?.extra).toEqual({ features: ['gpu'], accepts_new_projects: true });
    expect(zone3?.prices.other.gpu_hour).toBe('0.9000');
    expect(sim.calls).toHaveLength(1);
    expect(sim.calls[0]?.route).toBe('list');
    expect(sim.calls[0]?.headers.authorization).toBeUndefined();
  });

  it('lists clusters with no API key configured at all', async () => {
    const anonymous = new CloudApiClient({ baseUrl: sim.url, timeouts: FAST_TIMEOUTS });
    try {
      expect(await anonymous.listClusters()).toHaveLength(3);
    } finally {
      await anonymous.close();
    }
  });

  it('gets one cluster in both forms with the bearer key, normalised to the same prices', async () => {
    const b = await client.getCluster('zone-1', 'B');
    const a = await client.getCluster('zone-1', 'A');
    expect(b.shape).toBe('B');
    expect(a.shape).toBe('A');
    expect(a.status).toBe('active');
    expect(a.prices.vcoreRegular).toBe(b.prices.vcoreRegular);
    expect(a.prices.vcoreLight).toBe(b.prices.vcoreLight);
    expect(a.prices.other.vcore_25).toBe('0.0030');
    expect(sim.calls.map((c) => [c.route, c.path, c.headers.authorization])).toEqual([
      ['getB', '/cloud/cluster/zone-1/', `Bearer ${sim.apiKey}`],
      ['getA', '/api/cloud/cluster/zone-1/', `Bearer ${sim.apiKey}`],
    ]);
  });

  it('sees a price change in both shapes', async () => {
    sim.setPrice('zone-2', 'vcore_regular', '0.0999');
    expect((await client.getCluster('zone-2', 'A')).prices.vcoreRegular).toBe('0.0999');
    expect((await client.getCluster('zone-2', 'B')).prices.vcoreRegular).toBe('0.0999');
  });

  it('refuses with 404 for an unknown or inactive cluster', async () => {
    for (const name of ['zone-77', 'zone-9']) {
      const error = await failure(client.getCluster(name, 'A'), CloudRefusedError);
      expect(error.status).toBe(404);
      expect(error.reason).toBe('No Cluster matches the given query.');
    }
  });
});

describe('auth', () => {
  it('answers 403 to a wrong key as a refusal that never echoes the key', async () => {
    const wrongKey = 'wrong-key-1234567';
    const wrong = new CloudApiClient({ baseUrl: sim.url, apiKey: wrongKey, timeouts: FAST_TIMEOUTS });
    try {
      const error = await failure(wrong.resize(PROJECT, 102, { cores: 6 }), CloudRefusedError);
      expect(error.status).toBe(403);
      expect(error.reason).toBe(
        'The API key was refused (HTTP 403): You do not have permission to perform this action.',
      );
      expect(`${error.message} ${error.reason}`).not.toContain(wrongKey);
      expect(sim.applied).toEqual([]);
    } finally {
      await wrong.close();
    }
  });

  it('answers 401 to a malformed Authorization header', async () => {
    const malformed = new CloudApiClient({ baseUrl: sim.url, apiKey: 'two words', timeouts: FAST_TIMEOUTS });
    try {
      const error = await failure(malformed.getCluster('zone-1'), CloudRefusedError);
      expect(error.status).toBe(401);
      expect(error.reason).toBe(
        'The API key was refused (HTTP 401): Invalid token header. No credentials provided.',
      );
    } finally {
      await malformed.close();
    }
  });

  it('the sim answers 401 without an Authorization header on every authenticated route', async () => {
    const paths: [string, string][] = [
      ['GET', '/cloud/cluster/zone-1/'],
      ['GET', '/api/cloud/cluster/zone-1/'],
      ['POST', `/cloud/project/${PROJECT}/vm/102/upgrade/`],
      ['POST', `/cloud/project/${PROJECT}/vm/102/backups/daily-1/restore/`],
    ];
    for (const [method, path] of paths) {
      const res = await request(`${sim.url}${path}`, {
        method: method as 'GET' | 'POST',
        body: method === 'POST' ? '{}' : undefined,
      });
      expect(res.statusCode).toBe(401);
      expect(await res.body.json()).toEqual({ detail: 'Authentication credentials were not provided.' });
    }
    expect(sim.applied).toEqual([]);
  });

  it('refuses to send an authenticated call when no key is configured', async () => {
    const anonymous = new CloudApiClient({ baseUrl: sim.url, timeouts: FAST_TIMEOUTS });
    try {
      const error = await failure(anonymous.restore(PROJECT, 102, 'daily-1', {}), CloudInputError);
      expect(error.reason).toBe('No API key is configured (CLOUD_API_KEY); nothing was sent.');
      expect(sim.calls).toEqual([]);
    } finally {
      await anonymous.close();
    }
  });
});

describe('inputs are checked and encoded before any request', () => {
  it('refuses a bad project UUID, vmid, backup slug or cluster name without calling the service', async () => {
    const attempts: [Promise<unknown>, string, string][] = [
      [
        client.resize('not-a-uuid', 102, { cores: 6 }),
        'project',
        'The project id must be a UUID; nothing was sent.',
      ],
      [
        client.resize(`${PROJECT}/../x`, 102, { cores: 6 }),
        'project',
        'The project id must be a UUID; nothing was sent.',
      ],
      [
        client.resize(PROJECT, 0, { cores: 6 }),
        'vmid',
        'The VM id must be a positive whole number; nothing was sent.',
      ],
      [
        client.resize(PROJECT, -1, { cores: 6 }),
        'vmid',
        'The VM id must be a positive whole number; nothing was sent.',
      ],
      [
        client.resize(PROJECT, 1.5, { cores: 6 }),
        'vmid',
        'The VM id must be a positive whole number; nothing was sent.',
      ],
      [
        client.resize(PROJECT, Number.NaN, {}),
        'vmid',
        'The VM id must be a positive whole number; nothing was sent.',
      ],
    ];
    const slugReason = 'A backup slug may hold only letters, digits, ".", "_" and "-"; nothing was sent.';
    for (const slug of ['..', '.', 'a/b', 'a b', '', 'x%2F', 'daily-1?x=1', 'ümlaut']) {
      attempts.push([client.restore(PROJECT, 102, slug, {}), 'backup', slugReason]);
    }
    const nameReason = 'A cluster name may hold only letters, digits, ".", "_" and "-"; nothing was sent.';
    for (const name of ['zone/1', '..', '.', 'zone 1', '%2e%2e', 'zone-1#x']) {
      attempts.push([client.getCluster(name, 'A'), 'cluster', nameReason]);
      attempts.push([client.getCluster(name, 'B'), 'cluster', nameReason]);
    }
    for (const [attempt, field, reason] of attempts) {
      const error = await failure(attempt, CloudInputError);
      expect(error).toBeInstanceOf(CloudRefusedError);
      expect(error.field).toBe(field);
      expect(error.reason).toBe(reason);
      expect(error.status).toBeUndefined();
    }
    expect(sim.calls).toEqual([]);
  });

  it('sends valid segments as they are (encoding leaves the allowed alphabet untouched)', async () => {
    await client.restore(PROJECT, 102, 'pre-upgrade.2', {});
    expect(sim.calls[0]?.path).toBe(`/cloud/project/${PROJECT}/vm/102/backups/pre-upgrade.2/restore/`);
    expect(sim.applied).toHaveLength(1);
  });
});

describe('the Errors table: each refusal, its class and its sentence', () => {
  it('restore: the VM is not stopped', async () => {
    const error = await failure(client.restore(PROJECT, 104, 'daily-1', {}), CloudRefusedError);
    expect(error.status).toBe(409);
    expect(error.reason).toBe(SIM_REASONS.restoreRunning);
    expect(error.reason).toBe('The VM must be stopped to restore a backup.');
    expect(sim.applied).toEqual([]);
  });

  it('restore: autostart for a high-availability VM', async () => {
    sim.vm(PROJECT, 101).power = 'stopped';
    const error = await failure(
      client.restore(PROJECT, 101, 'daily-1', { autostart: true }),
      CloudRefusedError,
    );
    expect(error.status).toBe(400);
    expect(error.reason).toBe('autostart: Autostart is not allowed for high-availability VMs.');
    expect(error.fields).toEqual({ autostart: [SIM_REASONS.autostartHa] });
    expect(sim.applied).toEqual([]);
    // The same VM restores without autostart, and the task id looks like the service's.
    const ok = await client.restore(PROJECT, 101, 'daily-1', {});
    expect(ok.status).toBe(202);
    expect(ok.taskId).toMatch(/^UPID:[^:]+:[0-9A-F]{8}:[0-9A-F]{8}:[0-9A-F]{8}:qmrestore:101:/);
    expect(ok.message).toBe('Restore of VM 101 from daily-1 started.');
    expect(sim.applied).toMatchObject([
      { route: 'restore', vmid: 101, backup: 'daily-1', taskId: ok.taskId },
    ]);
  });

  it('resize: CPU or RAM lowered while the VM is running', async () => {
    for (const body of [{ cores: 1 }, { ram_gb: 1 }] as ResizeBody[]) {
      const error = await failure(client.resize(PROJECT, 104, body), CloudRefusedError);
      expect(error.status).toBe(400);
      expect(error.reason).toBe('Stop the VM before lowering CPU or RAM.');
    }
    expect(sim.vm(PROJECT, 104)).toMatchObject({ cores: 2, ramGb: 2 });
    expect(sim.applied).toEqual([]);
  });

  it('resize: CPU, RAM or CPU class lowered within 24 hours of creation', async () => {
    const allowedFrom = new Date(sim.vm(PROJECT, 103).createdAt.getTime() + 24 * HOUR);
    for (const body of [{ cores: 2 }, { ram_gb: 4 }, { cpu_type: 'light' }] as ResizeBody[]) {
      const error = await failure(client.resize(PROJECT, 103, body), CloudRefusedError);
      expect(error.status).toBe(400);
      expect(error.reason).toBe(
        `CPU, RAM and CPU class can be lowered 24 hours after creation or the last increase, from ${allowedFrom.toISOString()}.`,
      );
    }
    expect(sim.applied).toEqual([]);
    sim.clock.advance(22 * HOUR + 1000);
    expect((await client.resize(PROJECT, 103, { cores: 2, cpu_type: 'light' })).message).toBe(
      'Upgrade of VM 103 done.',
    );
    expect(sim.vm(PROJECT, 103)).toMatchObject({ cores: 2, cpuClass: 'light' });
  });

  it('resize: lowering within 24 hours of an increase; the increase is recorded at the sim clock', async () => {
    const raised = await client.resize(PROJECT, 102, { cores: 6 });
    expect(raised).toEqual({ message: 'Upgrade of VM 102 done.', status: 200 });
    const vm = sim.vm(PROJECT, 102);
    expect(vm.cores).toBe(6);
    expect(vm.lastIncreaseAt?.getTime()).toBe(sim.applied[0]?.at.getTime());
    const error = await failure(client.resize(PROJECT, 102, { cores: 4 }), CloudRefusedError);
    expect(error.reason).toMatch(
      /^CPU, RAM and CPU class can be lowered 24 hours after creation or the last increase/,
    );
    sim.clock.advance(24 * HOUR + 1);
    await client.resize(PROJECT, 102, { cores: 4 });
    expect(sim.vm(PROJECT, 102).cores).toBe(4);
    expect(sim.applied.map((a) => a.body)).toEqual([{ cores: 6 }, { cores: 4 }]);
  });

  it('resize: the OS disk is reduced', async () => {
    const error = await failure(client.resize(PROJECT, 102, { os_disk_gb: 80 }), CloudRefusedError);
    expect(error.status).toBe(400);
    expect(error.reason).toBe('os_disk_gb: The OS disk cannot shrink below its current 100 GB.');
    expect(error.fields).toEqual({ os_disk_gb: ['The OS disk cannot shrink below its current 100 GB.'] });
    expect(sim.vm(PROJECT, 102).osDiskGb).toBe(100);
    await client.resize(PROJECT, 102, { os_disk_gb: 120 });
    expect(sim.vm(PROJECT, 102).osDiskGb).toBe(120);
  });

  it('resize: wan_mode switched directly between ipv4, ipv6 and dual', async () => {
    for (const mode of ['ipv6', 'dual']) {
      const error = await failure(client.resize(PROJECT, 102, { wan_mode: mode }), CloudRefusedError);
      expect(error.status).toBe(400);
      expect(error.reason).toBe(
        `WAN mode cannot switch from ipv4 to ${mode} directly: set wan_mode to off first.`,
      );
    }
    await client.resize(PROJECT, 102, { wan_mode: 'off' });
    await client.resize(PROJECT, 102, { wan_mode: 'ipv6' });
    expect(sim.vm(PROJECT, 102).wanMode).toBe('ipv6');
  });

  it('resize: unknown fields and bad values are refused as field lists; private_network is accepted', async () => {
    const error = await failure(
      client.resize(PROJECT, 102, { color: 'red', cores: 'many' }),
      CloudRefusedError,
    );
    expect(error.status).toBe(400);
    expect(error.reason).toBe(
      'color: This field is not allowed; cores: A valid positive integer is required.',
    );
    expect(Object.keys(error.fields)).toEqual(['color', 'cores']);
    await client.resize(PROJECT, 102, { private_network: 'on' });
    expect(sim.vm(PROJECT, 102).privateNetwork).toBe('on');
  });

  it('404 for an unknown project, VM or backup', async () => {
    const cases: [Promise<unknown>, string][] = [
      [client.resize('11111111-2222-4333-8444-555555555555', 102, { cores: 6 }), 'Project not found.'],
      [client.resize(PROJECT, 999, { cores: 6 }), 'VM not found.'],
      [client.restore(PROJECT, 102, 'no-such-backup', {}), 'Backup not found.'],
    ];
    for (const [attempt, reason] of cases) {
      const error = await failure(attempt, CloudRefusedError);
      expect(error.status).toBe(404);
      expect(error.reason).toBe(reason);
    }
  });
});

describe('faults: the class says whether the request could have taken effect', () => {
  it('429 with Retry-After seconds → CloudRateLimitedError, nothing applied', async () => {
    sim.fault('resize', { kind: 'status', status: 429, retryAfter: 7 });
    const error = await failure(client.resize(PROJECT, 102, { cores: 6 }), CloudRateLimitedError);
    expect(error.retryAfterMs).toBe(7000);
    expect(error.reason).toBe(
      'The service is limiting the rate of calls (HTTP 429); retry after 7 s; nothing was applied.',
    );
    expect(isSurelyNotApplied(error)).toBe(true);
    expect(sim.applied).toEqual([]);
    // The fault applied once and cleared.
    await client.resize(PROJECT, 102, { cores: 6 });
    expect(sim.applied).toHaveLength(1);
  });

  it('429 with Retry-After as an HTTP date', async () => {
    const fixedNow = Date.parse('2030-01-01T00:00:00Z');
    const dated = new CloudApiClient({
      baseUrl: sim.url,
      apiKey: sim.apiKey,
      timeouts: FAST_TIMEOUTS,
      now: () => fixedNow,
    });
    try {
      sim.fault('getA', {
        kind: 'status',
        status: 429,
        retryAfter: new Date(fixedNow + 30_000).toUTCString(),
      });
      const error = await failure(dated.getCluster('zone-1', 'A'), CloudRateLimitedError);
      expect(error.retryAfterMs).toBe(30_000);
    } finally {
      await dated.close();
    }
  });

  it('503 with Retry-After → CloudUnavailableError, nothing applied', async () => {
    sim.fault('restore', { kind: 'status', status: 503, retryAfter: 2, times: 2 });
    for (let i = 0; i < 2; i++) {
      const error = await failure(client.restore(PROJECT, 102, 'daily-1', {}), CloudUnavailableError);
      expect(error.status).toBe(503);
      expect(error.retryAfterMs).toBe(2000);
      expect(error.reason).toBe(
        'The service is unavailable (HTTP 503); retry after 2 s; nothing was applied.',
      );
    }
    expect(sim.applied).toEqual([]);
    expect((await client.restore(PROJECT, 102, 'daily-1', {})).status).toBe(202);
  });

  it('connection refused (closed port) → CloudUnavailableError, surely not sent', async () => {
    const closed = await startCloudSim();
    const url = closed.url;
    await closed.close();
    const refused = new CloudApiClient({ baseUrl: url, apiKey: 'k-123456', timeouts: FAST_TIMEOUTS });
    try {
      const error = await failure(refused.resize(PROJECT, 102, { cores: 6 }), CloudUnavailableError);
      expect(error.reason).toBe('The service could not be reached (ECONNREFUSED); nothing was sent.');
      expect(isSurelyNotApplied(error)).toBe(true);
    } finally {
      await refused.close();
    }
  });

  it('a proxy refusing the tunnel (502) or asking for a password (407) → CloudUnavailableError, surely not sent', async () => {
    for (const status of [502, 407] as const) {
      const proxy = await startRefusingProxy(status);
      // https: the call asks the proxy for a CONNECT tunnel; http: it hands the proxy the request by absolute URI.
      for (const baseUrl of ['https://cloud.example.test', sim.url]) {
        const through = new CloudApiClient({
          baseUrl,
          apiKey: 'k-123456',
          timeouts: FAST_TIMEOUTS,
          proxy: {
            HTTPS_PROXY: `http://ops:s3cret@127.0.0.1:${proxy.port}`,
            HTTP_PROXY: `http://ops:s3cret@127.0.0.1:${proxy.port}`,
          },
        });
        try {
          if (status === 502 && baseUrl === sim.url) continue; // a forwarded 502 is the service's answer, below
          const error = await failure(through.resize(PROJECT, 102, { cores: 6 }), CloudUnavailableError);
          const said =
            status === 407
              ? 'the proxy asked for authentication (HTTP 407)'
              : 'the proxy refused to pass the call on (HTTP 502)';
          expect(error.reason, baseUrl).toBe(`The service could not be reached: ${said}; nothing was sent.`);
          expect(isSurelyNotApplied(error)).toBe(true);
          expect(JSON.stringify({ reason: error.reason, message: error.message })).not.toContain('s3cret');
        } finally {
          await through.close();
        }
      }
      expect(proxy.calls.length).toBeGreaterThan(0);
      await proxy.close();
    }
    expect(sim.applied).toEqual([]);
  });

  it('DNS failure → CloudUnavailableError, surely not sent', async () => {
    const nowhere = new CloudApiClient({
      baseUrl: 'http://cloud.nonexistent.invalid',
      apiKey: 'k-123456',
      timeouts: FAST_TIMEOUTS,
    });
    try {
      const error = await failure(nowhere.resize(PROJECT, 102, { cores: 6 }), CloudUnavailableError);
      expect(error.reason).toMatch(
        /^The service host could not be resolved \((ENOTFOUND|EAI_AGAIN)\); nothing was sent\.$/,
      );
    } finally {
      await nowhere.close();
    }
  });

  it('timeout after the sim applied the change → CloudOutcomeUnknownError, applied exactly once', async () => {
    sim.fault('resize', { kind: 'hang' });
    const error = await failure(client.resize(PROJECT, 102, { cores: 8 }), CloudOutcomeUnknownError);
    expect(error.reason).toBe(
      `The service did not answer within ${FAST_TIMEOUTS.headersMs} ms after the request was sent, so whether it took effect is unknown.`,
    );
    expect(isSurelyNotApplied(error)).toBe(false);
    expect(sim.applied).toHaveLength(1);
    expect(sim.applied[0]).toMatchObject({ route: 'resize', vmid: 102, body: { cores: 8 } });
    expect(sim.vm(PROJECT, 102).cores).toBe(8);
    expect(sim.calls).toHaveLength(1);
  });

  it('500 after applying → CloudOutcomeUnknownError', async () => {
    sim.fault('restore', { kind: 'status', status: 500, afterApply: true });
    const error = await failure(client.restore(PROJECT, 102, 'daily-1', {}), CloudOutcomeUnknownError);
    expect(error.status).toBe(500);
    expect(error.reason).toBe(
      'The service failed with HTTP 500 (A server error occurred), so whether the call took effect is unknown.',
    );
    expect(sim.applied).toHaveLength(1);
  });

  it('dropped connection after applying, or before → CloudOutcomeUnknownError either way', async () => {
    sim.fault('resize', { kind: 'drop' });
    const after = await failure(client.resize(PROJECT, 102, { cores: 6 }), CloudOutcomeUnknownError);
    expect(after.reason).toBe(
      'The connection was dropped after the request was sent, so whether it took effect is unknown.',
    );
    expect(sim.applied).toHaveLength(1);
    sim.fault('resize', { kind: 'drop', afterApply: false });
    const before = await failure(client.resize(PROJECT, 102, { cores: 8 }), CloudOutcomeUnknownError);
    expect(before.reason).toBe(after.reason);
    expect(sim.applied).toHaveLength(1);
    expect(sim.vm(PROJECT, 102).cores).toBe(6);
  });

  it('non-JSON 2xx → CloudProtocolError; JSON of the wrong shape too', async () => {
    sim.fault('resize', { kind: 'body', body: 'OK' });
    const text = await failure(client.resize(PROJECT, 102, { cores: 6 }), CloudProtocolError);
    expect(text.status).toBe(200);
    expect(text.reason).toBe(
      'The service answered HTTP 200 with a body of type text/plain instead of the documented JSON.',
    );
    sim.fault('list', { kind: 'body', body: '[{"name":"zone-1"}]', contentType: 'application/json' });
    const shape = await failure(client.listClusters(), CloudProtocolError);
    expect(shape.reason).toMatch(
      /^The service answered HTTP 200 with JSON that is not the documented listClusters answer at 0\.price_model: /,
    );
    sim.fault('restore', {
      kind: 'body',
      body: '{"message":"started"}',
      contentType: 'application/json',
      status: 202,
    });
    const missing = await failure(client.restore(PROJECT, 102, 'daily-1', {}), CloudProtocolError);
    expect(missing.reason).toMatch(/at task_id/);
  });

  it('HTML 502 page → CloudOutcomeUnknownError with a clean sentence', async () => {
    const page =
      '<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>';
    sim.fault('resize', {
      kind: 'status',
      status: 502,
      body: page,
      contentType: 'text/html',
      afterApply: true,
    });
    const error = await failure(client.resize(PROJECT, 102, { cores: 6 }), CloudOutcomeUnknownError);
    expect(error.status).toBe(502);
    expect(error.reason).toBe(
      'The service failed with HTTP 502 (502 Bad Gateway), so whether the call took effect is unknown.',
    );
    expect(error.reason).not.toMatch(/[<>]/);
    sim.fault('getB', {
      kind: 'body',
      status: 502,
      body: '<html><body>Bad gateway</body></html>',
      contentType: 'text/html',
    });
    const bare = await failure(client.getCluster('zone-1'), CloudOutcomeUnknownError);
    expect(bare.reason).toBe('The service failed with HTTP 502, so whether the call took effect is unknown.');
  });

  it('latency below the timeout is only slower', async () => {
    sim.fault('getB', { kind: 'latency', ms: 300 });
    const started = performance.now();
    expect((await client.getCluster('zone-1')).name).toBe('zone-1');
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
  });

  it('honours an AbortSignal: before sending → unavailable; in flight → outcome unknown', async () => {
    const aborted = AbortSignal.abort();
    const early = await failure(
      client.resize(PROJECT, 102, { cores: 6 }, { signal: aborted }),
      CloudUnavailableError,
    );
    expect(early.reason).toBe('The call was cancelled before it was sent.');
    expect(sim.calls).toEqual([]);
    sim.fault('resize', { kind: 'latency', ms: 600 });
    const late = await failure(
      client.resize(PROJECT, 102, { cores: 6 }, { signal: AbortSignal.timeout(100) }),
      CloudOutcomeUnknownError,
    );
    expect(late.reason).toBe(
      'The call was cancelled while in flight after the request was sent, so whether it took effect is unknown.',
    );
  });

  it('reports every call to onCall with its outcome and status, never a key', async () => {
    await client.listClusters();
    await client.resize(PROJECT, 104, { cores: 1 }).catch(() => undefined);
    sim.fault('getA', { kind: 'status', status: 503 });
    await client.getCluster('zone-1', 'A').catch(() => undefined);
    expect(reports.map(({ operation, status, outcome }) => ({ operation, status, outcome }))).toEqual([
      { operation: 'listClusters', status: 200, outcome: 'ok' },
      { operation: 'resize', status: 400, outcome: 'refused' },
      { operation: 'getCluster', status: 503, outcome: 'unavailable' },
    ]);
    expect(reports.every((r) => r.durationMs >= 0)).toBe(true);
    expect(JSON.stringify(reports)).not.toContain(sim.apiKey);
  });
});
