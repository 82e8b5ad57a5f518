/** The simulator's world: clusters with prices, projects with VMs and backups, and the seed that builds it. */

export type WanMode = 'off' | 'ipv4' | 'ipv6' | 'dual';
export type Power = 'running' | 'stopped';

/** A cluster as seeded. Prices use Shape B names; Shape A is derived unless `pricesA` is given. */
export interface SeedCluster {
  name: string;
  description?: string;
  location?: string;
  /** Only `active` clusters are listed or returned; default `active`. */
  status?: string;
  prices: Record<string, string>;
  pricesA?: Record<string, string>;
  /** Extra record fields the spec does not name (kept by the client). */
  extra?: Record<string, unknown>;
}

/** A VM as seeded. Times are ISO strings, or hours before the sim's start. */
export interface SeedVm {
  vmid: number;
  name?: string;
  power: Power;
  ha?: boolean;
  cores: number;
  ramGb: number;
  osDiskGb: number;
  cpuClass?: string;
  wanMode?: WanMode;
  privateNetwork?: string;
  createdAt?: string;
  createdHoursAgo?: number;
  lastIncreaseAt?: string;
  backups?: string[];
}

export interface SeedProject {
  uuid: string;
  name?: string;
  vms: SeedVm[];
}

/** Everything the simulator starts from; loadable from JSON (`--seed file.json`). */
export interface SimSeed {
  clusters: SeedCluster[];
  projects: SeedProject[];
}

/** The live record of one cluster. */
export interface SimCluster {
  name: string;
  description: string;
  location: string;
  status: string;
  pricesA: Record<string, string>;
  pricesB: Record<string, string>;
  extra: Record<string, unknown>;
}

/** The live record of one VM; tests and `/_sim/vm` change it directly. */
export interface SimVm {
  projectUuid: string;
  vmid: number;
  name?: string;
  power: Power;
  ha: boolean;
  cores: number;
  ramGb: number;
  osDiskGb: number;
  cpuClass: string;
  wanMode: WanMode;
  privateNetwork: string;
  createdAt: Date;
  lastIncreaseAt?: Date;
  backups: string[];
  lastRestore?: { backup: string; at: Date; taskId: string };
}

export interface SimState {
  clusters: Map<string, SimCluster>;
  /** project uuid → vmid → VM. */
  projects: Map<string, Map<number, SimVm>>;
}

/** Shape B price field → Shape A name where the two differ (assumed pairing, as in the client). */
export const B_TO_A: Readonly<Record<string, string>> = { vcore_regular: 'vcore', vcore_light: 'vcore_50' };
const A_TO_B: Readonly<Record<string, string>> = { vcore: 'vcore_regular', vcore_50: 'vcore_light' };

const SHARED_PRICES = {
  vcore_off: '0.0010',
  ram_off: '0.0005',
  storage_fast: '0.00015',
  public_ip: '0.0050',
  private_network_tag: '0.0020',
  private_network_external_vlan: '0.0100',
  cloud_gateway_standard: '0.0300',
  pbs_pool: '0.0040',
};

/** Three zones, project shop-prod (the policy example's uuid) with four VMs, and a second project. */
export const DEFAULT_SEED: SimSeed = Object.freeze({
  clusters: [
    {
      name: 'zone-1',
      description: 'Zone 1, primary',
      location: 'Frankfurt',
      prices: { vcore_regular: '0.0120', vcore_light: '0.0060', ram: '0.0040', ...SHARED_PRICES },
      pricesA: { vcore: '0.0120', vcore_50: '0.0060', vcore_25: '0.0030', ram: '0.0040', ...SHARED_PRICES },
    },
    {
      name: 'zone-2',
      description: 'Zone 2',
      location: 'Amsterdam',
      prices: { vcore_regular: '0.0135', vcore_light: '0.0068', ram: '0.0045', ...SHARED_PRICES },
    },
    {
      name: 'zone-3',
      description: 'Zone 3, with GPU hosts',
      location: 'Paris',
      prices: {
        vcore_regular: '0.0110',
        vcore_light: '0.0055',
        ram: '0.0038',
        gpu_hour: '0.9000',
        ...SHARED_PRICES,
      },
      extra: { features: ['gpu'], accepts_new_projects: true },
    },
    {
      name: 'zone-9',
      description: 'Retired zone',
      location: 'Nowhere',
      status: 'retired',
      prices: { vcore_regular: '0.0200', vcore_light: '0.0100', ram: '0.0060', ...SHARED_PRICES },
    },
  ],
  projects: [
    {
      uuid: '0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10',
      name: 'shop-prod',
      vms: [
        {
          vmid: 101,
          name: 'web-1',
          power: 'running',
          ha: true,
          cores: 2,
          ramGb: 4,
          osDiskGb: 50,
          cpuClass: 'regular',
          wanMode: 'ipv4',
          createdHoursAgo: 24 * 30,
          backups: ['daily-1', 'weekly-1'],
        },
        {
          vmid: 102,
          name: 'db-1',
          power: 'stopped',
          cores: 4,
          ramGb: 8,
          osDiskGb: 100,
          cpuClass: 'regular',
          wanMode: 'ipv4',
          createdHoursAgo: 24 * 30,
          backups: ['daily-1', 'pre-upgrade.2'],
        },
        {
          vmid: 103,
          name: 'worker-new',
          power: 'stopped',
          cores: 4,
          ramGb: 8,
          osDiskGb: 40,
          cpuClass: 'regular',
          wanMode: 'off',
          createdHoursAgo: 2,
          backups: [],
        },
        {
          vmid: 104,
          name: 'edge-1',
          power: 'running',
          cores: 2,
          ramGb: 2,
          osDiskGb: 20,
          cpuClass: 'light',
          wanMode: 'dual',
          privateNetwork: 'on',
          createdHoursAgo: 24 * 10,
          backups: ['daily-1'],
        },
      ],
    },
    {
      uuid: 'a3c1e2d4-5b6f-4a7b-8c9d-0e1f2a3b4c5d',
      name: 'shop-staging',
      vms: [
        {
          vmid: 201,
          name: 'staging-1',
          power: 'stopped',
          cores: 1,
          ramGb: 2,
          osDiskGb: 20,
          cpuClass: 'light',
          wanMode: 'ipv6',
          createdHoursAgo: 24 * 3,
          backups: ['nightly_2025-01-01'],
        },
      ],
    },
  ],
}) as SimSeed;

/** Builds a fresh, mutable state from a seed; nothing of the seed is shared with it. */
export function buildState(seed: SimSeed, now: Date): SimState {
  const state: SimState = { clusters: new Map(), projects: new Map() };
  for (const cluster of seed.clusters) addClusterTo(state, cluster);
  for (const project of seed.projects) {
    const vms = new Map<number, SimVm>();
    for (const vm of project.vms) {
      const createdAt = vm.createdAt
        ? new Date(vm.createdAt)
        : new Date(now.getTime() - (vm.createdHoursAgo ?? 24 * 30) * 3_600_000);
      vms.set(vm.vmid, {
        projectUuid: project.uuid,
        vmid: vm.vmid,
        name: vm.name,
        power: vm.power,
        ha: vm.ha ?? false,
        cores: vm.cores,
        ramGb: vm.ramGb,
        osDiskGb: vm.osDiskGb,
        cpuClass: vm.cpuClass ?? 'regular',
        wanMode: vm.wanMode ?? 'off',
        privateNetwork: vm.privateNetwork ?? 'off',
        createdAt,
        lastIncreaseAt: vm.lastIncreaseAt ? new Date(vm.lastIncreaseAt) : undefined,
        backups: [...(vm.backups ?? [])],
      });
    }
    state.projects.set(project.uuid, vms);
  }
  return state;
}

/** Adds (or replaces) a cluster. */
export function addClusterTo(state: SimState, cluster: SeedCluster): void {
  const pricesB = { ...cluster.prices };
  const pricesA =
    cluster.pricesA !== undefined
      ? { ...cluster.pricesA }
      : Object.fromEntries(Object.entries(pricesB).map(([key, value]) => [B_TO_A[key] ?? key, value]));
  state.clusters.set(cluster.name, {
    name: cluster.name,
    description: cluster.description ?? '',
    location: cluster.location ?? '',
    status: cluster.status ?? 'active',
    pricesA,
    pricesB,
    extra: structuredClone(cluster.extra ?? {}),
  });
}

/** Sets one price in both shapes, under each shape's name (`vcore_regular` ⇔ `vcore`, `vcore_light` ⇔ `vcore_50`). */
export function setPriceIn(state: SimState, clusterName: string, field: string, value: string): void {
  const cluster = state.clusters.get(clusterName);
  if (!cluster) throw new Error(`sim: no cluster ${clusterName}`);
  // vcore_25 exists in Shape A only; every other price is in both shapes.
  if (field !== 'vcore_25') cluster.pricesB[A_TO_B[field] ?? field] = value;
  cluster.pricesA[B_TO_A[field] ?? field] = value;
}

/** State as plain JSON, for `GET /_sim/state`. */
export function stateToJson(state: SimState): unknown {
  return {
    clusters: [...state.clusters.values()],
    projects: [...state.projects.entries()].map(([uuid, vms]) => ({ uuid, vms: [...vms.values()] })),
  };
}
