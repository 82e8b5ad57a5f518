import type { Cluster } from '../../cloud/types.ts';
import { flattenPrices } from '../../pricing/price-fields.ts';
import { rankReferenceCosts } from '../../rules/cost.ts';
import type { ReferenceVm } from '../../rules/types.ts';
import type { ClusterView, ReferenceVmView } from './clusters.ts';
import { hourlyText, monthlyText } from './money.ts';

/** Clusters sorted by name, each with its prices and the reference VM's exact cost, the cheapest marked. */
export function clusterViews(clusters: Cluster[], reference: ReferenceVm): ClusterView[] {
  const sorted = [...clusters].sort((a, b) => a.name.localeCompare(b.name, 'en'));
  return rankReferenceCosts(sorted, reference).map(({ item, cost, cheapest }) => ({
    name: item.name,
    location: item.location,
    description: item.description || undefined,
    status: item.status,
    prices: flattenPrices(item.prices),
    cost: {
      // A total with a missing price would be understated: it is not shown as a figure.
      hourly: cost.missing.length === 0 ? hourlyText(cost.hourly) : undefined,
      monthly: cost.missing.length === 0 ? monthlyText(cost.monthly) : undefined,
      missing: cost.missing,
      cheapest,
    },
  }));
}

/** The policy's reference VM in the blocks' spelling. */
export function referenceVmView(reference: ReferenceVm): ReferenceVmView {
  return {
    cores: reference.cores,
    ramGb: reference.ram_gb,
    osDiskGb: reference.os_disk_gb,
    cpuClass: reference.cpu_class,
    publicIp: reference.public_ip,
  };
}
