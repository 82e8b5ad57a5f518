import type { SeedVm, SimSeed } from '../../sim/cloud/server.ts';

/** The bench's own project in the simulator (not one of the default seed's). */
export const BENCH_PROJECT_UUID = '5e1c7a00-0b3e-4c1a-9d2f-be0c0ffee001';

/** A stopped, month-old VM of 2 cores / 4 GB / 50 GB: any resize up to 4 cores is allowed. */
function benchVm(vmid: number): SeedVm {
  return {
    vmid,
    name: `bench-${vmid}`,
    power: 'stopped',
    cores: 2,
    ramGb: 4,
    osDiskGb: 50,
    wanMode: 'ipv4',
    createdHoursAgo: 24 * 30,
  };
}

/**
 * The default seed plus the bench project with VMs 101 and 102 and, when asked, `count` more from `firstVmid`
 * (one per request of the pipeline scenario, so no two requests wait on the same VM), and `extraClusters` more zones.
 */
export function benchSeed(
  base: SimSeed,
  extra?: { count: number; firstVmid: number },
  extraClusters = 0,
): { seed: SimSeed; projectUuid: string } {
  const vms: SeedVm[] = [benchVm(101), benchVm(102)];
  if (extra) for (let i = 0; i < extra.count; i++) vms.push(benchVm(extra.firstVmid + i));
  const clusters = structuredClone(base.clusters);
  const model = clusters[0];
  // Copies of the first zone with prices a little apart, so a digest has many rows (and is split in parts).
  for (let i = 1; model && i <= extraClusters; i++) {
    const prices = Object.fromEntries(
      Object.entries(model.prices).map(([field, value]) => [
        field,
        (Number(value) * (1 + i / 100)).toFixed(5),
      ]),
    );
    clusters.push({
      name: `bench-zone-${i}`,
      description: `Bench zone ${i}`,
      location: `Bench ${i}`,
      prices,
    });
  }
  return {
    seed: {
      clusters,
      projects: [...structuredClone(base.projects), { uuid: BENCH_PROJECT_UUID, name: 'bench', vms }],
    },
    projectUuid: BENCH_PROJECT_UUID,
  };
}
