import type { Cluster } from '../../cloud/types.ts';
import { rankReferenceCosts } from '../../rules/cost.ts';
import { optionalPolicy, withCloud } from '../cloud.ts';
import { type CliIo, table, write } from '../io.ts';

/** `cloudops clusters [--json]`: active clusters (list endpoint, no key) with the reference VM's cost in each. */
export async function clustersCommand(io: CliIo, json: boolean): Promise<number> {
  const policy = await optionalPolicy(io);
  const clusters = await withCloud(io, false, (client) => client.listClusters());
  const ranked = rankReferenceCosts(clusters, policy.reference_vm);
  if (json) {
    const out = ranked.map(({ item, cost, cheapest }) => ({
      ...clusterJson(item),
      reference: {
        hourly: cost.hourly.toFixed(4),
        monthly: cost.monthly.toFixed(2),
        cheapest,
        missing: cost.missing,
      },
    }));
    await write(
      io.stdout,
      `${JSON.stringify({ currency: policy.currency, referenceVm: policy.reference_vm, clusters: out })}\n`,
    );
    return 0;
  }
  if (clusters.length === 0) {
    await write(io.stdout, 'No active clusters.\n');
    return 0;
  }
  const ref = policy.reference_vm;
  const rows = [
    [
      'NAME',
      'LOCATION',
      'VCORE',
      'LIGHT',
      'RAM/GB',
      'DISK/GB',
      'PUBLIC IP',
      `REF ${policy.currency}/H`,
      `REF ${policy.currency}/MONTH`,
      '',
    ],
    ...ranked.map(({ item, cost, cheapest }) => [
      item.name,
      item.location,
      item.prices.vcoreRegular ?? '-',
      item.prices.vcoreLight ?? '-',
      item.prices.ram ?? '-',
      item.prices.storageFast ?? '-',
      item.prices.publicIp ?? '-',
      cost.hourly.toFixed(4),
      cost.monthly.toFixed(2),
      [cheapest ? 'cheapest' : '', cost.missing.length > 0 ? `missing ${cost.missing.join(', ')}` : '']
        .filter(Boolean)
        .join('; '),
    ]),
  ];
  const refLine = `Hourly prices (${policy.currency}). Reference VM: ${ref.cores} ${ref.cpu_class} cores, ${ref.ram_gb} GB RAM, ${ref.os_disk_gb} GB disk, ${ref.public_ip ? '1 public IP' : 'no public IP'}; month = 730 h.`;
  await write(io.stdout, `${table(rows)}\n${refLine}\n`);
  return 0;
}

/** A cluster as JSON: the wire-independent model, every price kept (named and other). */
export function clusterJson(cluster: Cluster) {
  const { other, ...named } = cluster.prices;
  return {
    name: cluster.name,
    description: cluster.description,
    location: cluster.location,
    ...(cluster.status !== undefined ? { status: cluster.status } : {}),
    shape: cluster.shape,
    prices: named,
    otherPrices: other,
    extra: cluster.extra,
  };
}
