import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type CloudSim, DEFAULT_SEED, type SimSeed, startCloudSim } from '../../sim/cloud/server.ts';
import { killGroup, spawnGroup } from '../../sim/process-group.ts';
import { CloudApiClient, FAST_TIMEOUTS } from '../../src/cloud/client.ts';
import { CloudRateLimitedError } from '../../src/cloud/errors.ts';
import { STARTUP_WAIT_MS } from '../helpers/startup.ts';

const PROJECT = '0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10';

let sim: CloudSim;
let client: CloudApiClient;

beforeEach(async () => {
  sim = await startCloudSim();
  client = new CloudApiClient({ baseUrl: sim.url, apiKey: sim.apiKey, timeouts: FAST_TIMEOUTS });
});

afterEach(async () => {
  await client.close();
  await sim.close();
});

async function control(path: string, body?: unknown): Promise<{ status: number; json: unknown }> {
  const res = await request(`${sim.url}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.statusCode, json: await res.body.json() };
}

describe('overlapping mutations on one VM', () => {
  it('counts a second mutation that starts while one on the same VM is in flight (latency included)', async () => {
    sim.fault('resize', { kind: 'latency', ms: 300 });
    const results = await Promise.allSettled([
      client.resize(PROJECT, 102, { cores: 6 }),
      // The restore goes to the same VM while the resize sleeps in the sim.
      new Promise((resolve) => setTimeout(resolve, 50)).then(() =>
        client.restore(PROJECT, 102, 'daily-1', {}),
      ),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled']);
    expect(sim.overlaps).toBe(1);
    const [first, second] = sim.calls;
    expect(first && second && second.startMs < (first.endMs ?? 0)).toBe(true);
  });

  it('does not count calls on different VMs, nor calls one after the other', async () => {
    sim.fault('resize', { kind: 'latency', ms: 200, times: 2 });
    await Promise.all([client.resize(PROJECT, 102, { cores: 6 }), client.resize(PROJECT, 103, { cores: 6 })]);
    await client.resize(PROJECT, 102, { os_disk_gb: 200 });
    await client.resize(PROJECT, 102, { os_disk_gb: 300 });
    expect(sim.overlaps).toBe(0);
    expect(sim.applied).toHaveLength(4);
  });

  it('keeps a hanging mutation in flight until the client gives up', async () => {
    sim.fault('resize', { kind: 'hang' });
    const hung = client.resize(PROJECT, 102, { cores: 6 }).catch((error: unknown) => error);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await client.resize(PROJECT, 102, { os_disk_gb: 200 });
    await hung;
    expect(sim.overlaps).toBe(1);
  });
});

describe('records', () => {
  it('records every call with route, method, path, body, status and times; applied holds successes only', async () => {
    await client.resize(PROJECT, 102, { cores: 6 });
    await client.resize(PROJECT, 102, { os_disk_gb: 1 }).catch(() => undefined);
    expect(
      sim.calls.map(({ route, method, path, body, status }) => ({ route, method, path, body, status })),
    ).toEqual([
      {
        route: 'resize',
        method: 'POST',
        path: `/cloud/project/${PROJECT}/vm/102/upgrade/`,
        body: { cores: 6 },
        status: 200,
      },
      {
        route: 'resize',
        method: 'POST',
        path: `/cloud/project/${PROJECT}/vm/102/upgrade/`,
        body: { os_disk_gb: 1 },
        status: 400,
      },
    ]);
    expect(sim.calls.every((c) => c.endMs !== undefined && c.endMs >= c.startMs)).toBe(true);
    expect(sim.applied).toEqual([
      { route: 'resize', projectUuid: PROJECT, vmid: 102, body: { cores: 6 }, at: expect.any(Date) },
    ]);
    sim.resetRecords();
    expect([sim.calls.length, sim.applied.length, sim.overlaps]).toEqual([0, 0, 0]);
  });

  it('answers 404 to unknown paths and 405 to a wrong method', async () => {
    const missing = await request(`${sim.url}/cloud/nothing/`);
    expect(missing.statusCode).toBe(404);
    await missing.body.dump();
    const wrong = await request(`${sim.url}/cloud/cluster/`, { method: 'POST', body: '{}' });
    expect(wrong.statusCode).toBe(405);
    await wrong.body.dump();
  });
});

describe('state, clock and seed', () => {
  it('adds and removes clusters', async () => {
    sim.addCluster({
      name: 'zone-4',
      location: 'Oslo',
      prices: { vcore_regular: '0.01', vcore_light: '0.005', ram: '0.002' },
    });
    sim.removeCluster('zone-2');
    expect((await client.listClusters()).map((c) => c.name)).toEqual(['zone-1', 'zone-3', 'zone-4']);
    expect((await client.getCluster('zone-4', 'A')).prices.vcoreLight).toBe('0.005');
  });

  it('uses an external clock when given one, and refuses to move it', async () => {
    let now = new Date('2031-05-01T12:00:00Z');
    const external = await startCloudSim({ now: () => now });
    try {
      expect(external.clock.now()).toEqual(now);
      now = new Date('2031-05-02T12:00:00Z');
      expect(external.clock.now()).toEqual(now);
      expect(() => external.clock.advance(1)).toThrow(/external/);
    } finally {
      await external.close();
    }
  });

  it('loads a custom seed and configurable field names', async () => {
    const seed: SimSeed = {
      clusters: [{ name: 'edge-1', prices: { vcore_regular: '1', vcore_light: '0.5', ram: '0.1' } }],
      projects: [
        {
          uuid: '11111111-2222-4333-8444-555555555555',
          vms: [
            {
              vmid: 7,
              power: 'stopped',
              cores: 2,
              ramGb: 2,
              osDiskGb: 10,
              createdAt: '2020-01-01T00:00:00Z',
            },
          ],
        },
      ],
    };
    const custom = await startCloudSim({
      seed,
      apiKey: 'custom-key',
      fieldNames: {
        cpuClass: { field: 'cpu_class', values: ['dedicated', 'shared'] },
        privateNetwork: { field: 'vlan', values: ['no', 'yes'] },
      },
    });
    const customClient = new CloudApiClient({
      baseUrl: custom.url,
      apiKey: 'custom-key',
      timeouts: FAST_TIMEOUTS,
    });
    try {
      expect((await customClient.listClusters()).map((c) => c.name)).toEqual(['edge-1']);
      await customClient.resize('11111111-2222-4333-8444-555555555555', 7, {
        cpu_class: 'shared',
        vlan: 'yes',
      });
      expect(custom.vm('11111111-2222-4333-8444-555555555555', 7)).toMatchObject({
        cpuClass: 'shared',
        privateNetwork: 'yes',
      });
      await expect(
        customClient.resize('11111111-2222-4333-8444-555555555555', 7, { cpu_type: 'light' }),
      ).rejects.toThrow(/cpu_type: This field is not allowed/);
    } finally {
      await customClient.close();
      await custom.close();
    }
  });

  it('DEFAULT_SEED has the documented zones and project, and is not mutated by a sim', async () => {
    expect(DEFAULT_SEED.clusters.map((c) => c.name)).toEqual(
      expect.arrayContaining(['zone-1', 'zone-2', 'zone-3']),
    );
    const project = DEFAULT_SEED.projects.find((p) => p.uuid === PROJECT);
    expect(project?.vms.find((v) => v.vmid === 101)).toMatchObject({ ha: true, power: 'running' });
    expect(project?.vms.find((v) => v.vmid === 102)).toMatchObject({ power: 'stopped' });
    await client.resize(PROJECT, 102, { cores: 12 });
    expect(project?.vms.find((v) => v.vmid === 102)?.cores).toBe(4);
  });
});

describe('/_sim HTTP control', () => {
  it('injects faults, moves the clock, sets prices and VMs, and shows the state', async () => {
    expect(
      (await control('/_sim/fault', { route: 'getB', fault: { kind: 'status', status: 429, retryAfter: 3 } }))
        .status,
    ).toBe(200);
    const limited = await client.getCluster('zone-1').catch((error: unknown) => error);
    expect(limited).toBeInstanceOf(CloudRateLimitedError);

    const before = sim.clock.now().getTime();
    const moved = await control('/_sim/clock', { advanceMs: 3_600_000 });
    expect(new Date((moved.json as { now: string }).now).getTime() - before).toBeGreaterThanOrEqual(
      3_600_000,
    );
    await control('/_sim/clock', { set: '2032-01-01T00:00:00Z' });
    expect(sim.clock.now().getUTCFullYear()).toBe(2032);

    await control('/_sim/price', { cluster: 'zone-1', field: 'ram', value: '0.0777' });
    expect((await client.getCluster('zone-1', 'A')).prices.ram).toBe('0.0777');

    await control('/_sim/vm', { project: PROJECT, vmid: 101, power: 'stopped' });
    expect(sim.vm(PROJECT, 101).power).toBe('stopped');

    const state = (await control('/_sim/state')).json as {
      calls: { route: string; status?: number }[];
      applied: unknown[];
      overlaps: number;
      projects: { uuid: string; vms: { vmid: number }[] }[];
    };
    expect(state.calls.map((c) => [c.route, c.status])).toEqual([
      ['getB', 429],
      ['getA', 200],
    ]);
    expect(state.overlaps).toBe(0);
    expect(state.projects.find((p) => p.uuid === PROJECT)?.vms.map((v) => v.vmid)).toEqual([
      101, 102, 103, 104,
    ]);

    const bad = await control('/_sim/fault', { route: 'nowhere', fault: { kind: 'drop' } });
    expect(bad.status).toBe(400);
  });
});

describe('npm run sim', () => {
  it('prints its URL and key, serves a --seed file, and exits 0 on SIGTERM', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cloud-sim-'));
    const seedFile = join(dir, 'seed.json');
    const seed: SimSeed = { clusters: [{ name: 'only-1', prices: { ram: '0.1' } }], projects: [] };
    await writeFile(seedFile, JSON.stringify(seed));
    const child = spawnGroup(
      process.execPath,
      ['--import', 'tsx', 'sim/cloud/main.ts', '--port', '0', '--seed', seedFile],
      {
        cwd: process.cwd(),
        env: { ...process.env, SIM_API_KEY: 'spawned-key' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    try {
      let out = '';
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no URL printed: ${out}`)), STARTUP_WAIT_MS);
        child.stdout?.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          const match = /listening on (http:\/\/\S+)/.exec(out);
          if (match?.[1] && out.includes('API key: spawned-key')) {
            clearTimeout(timer);
            resolve(match[1]);
          }
        });
      });
      const spawnedClient = new CloudApiClient({ baseUrl: url, timeouts: FAST_TIMEOUTS });
      expect((await spawnedClient.listClusters()).map((c) => c.name)).toEqual(['only-1']);
      await spawnedClient.close();
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      killGroup(child, 'SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) killGroup(child);
      await rm(dir, { recursive: true, force: true });
    }
  });
});
