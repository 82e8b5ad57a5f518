import { CloudRefusedError } from '../../cloud/errors.ts';
import type { Cluster } from '../../cloud/types.ts';
import { referenceVmCost } from '../../rules/cost.ts';
import { optionalPolicy, withCloud } from '../cloud.ts';
import { type CliIo, table, write } from '../io.ts';
import { clusterJson } from './clusters.ts';

/**
 * `cloudops cluster <name> [--shape A|B] [--json]`: one cluster from the get endpoint (bearer key). Without
 * `--shape` it asks for Shape A (it has the status) and falls back to Shape B where Shape A is not found.
 */
export async function clusterCommand(
  io: CliIo,
  name: string,
  shape: 'A' | 'B' | undefined,
  json: boolean,
): Promise<number> {
  const policy = await optionalPolicy(io);
  const cluster = await withCloud(io, true, async (client): Promise<Cluster> => {
    if (shape) return client.getCluster(name, shape);
    try {
      return await client.getCluster(name, 'A');
    } catch (error) {
      if (error instanceof CloudRefusedError && error.status === 404) return client.getCluster(name, 'B');
      throw error;
    }
  });
  const cost = referenceVmCost(cluster.prices, policy.reference_vm);
  if (json) {
    const reference = {
      hourly: cost.hourly.toFixed(4),
      monthly: cost.monthly.toFixed(2),
      missing: cost.missing,
    };
    await write(
      io.stdout,
      `${JSON.stringify({ ...clusterJson(cluster), currency: policy.currency, reference })}\n`,
    );
    return 0;
  }
  const { other, ...named } = cluster.prices;
  const priceRows = [
    ...Object.entries(named).map(([key, value]) => [`  ${key}`, String(value)]),
    ...Object.entries(other).map(([key, value]) => [`  ${key}`, value]),
  ];
  const lines = [
    `${cluster.name} (Shape ${cluster.shape})${cluster.status ? `, status ${cluster.status}` : ''}`,
    `Location: ${cluster.location}`,
    `Description: ${cluster.description}`,
    `Hourly prices (${policy.currency}):`,
    table(priceRows),
    `Reference VM: ${policy.currency} ${cost.hourly.toFixed(4)}/h, ${policy.currency} ${cost.monthly.toFixed(2)}/month${cost.missing.length > 0 ? ` (missing prices counted 0: ${cost.missing.join(', ')})` : ''}`,
  ];
  if (Object.keys(cluster.extra).length > 0) lines.push(`Other fields: ${JSON.stringify(cluster.extra)}`);
  await write(io.stdout, `${lines.join('\n')}\n`);
  return 0;
}
