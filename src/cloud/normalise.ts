/** Shape A and Shape B cluster records into the one `Cluster` model the bot uses. */
import type { ClusterAWire, ClusterBWire } from './schemas.ts';
import type { Cluster, PriceModel } from './types.ts';

type Named = Exclude<keyof PriceModel, 'other'>;

/** Wire field → model field, per shape. Shape A `vcore`/`vcore_50` are taken as regular/light (assumed). */
const A_FIELDS: Record<string, Named> = {
  vcore: 'vcoreRegular',
  vcore_50: 'vcoreLight',
  vcore_off: 'vcoreOff',
  ram: 'ram',
  ram_off: 'ramOff',
  storage_fast: 'storageFast',
  public_ip: 'publicIp',
  private_network_tag: 'privateNetworkTag',
};
const B_FIELDS: Record<string, Named> = {
  vcore_regular: 'vcoreRegular',
  vcore_light: 'vcoreLight',
  vcore_off: 'vcoreOff',
  ram: 'ram',
  ram_off: 'ramOff',
  storage_fast: 'storageFast',
  public_ip: 'publicIp',
  private_network_tag: 'privateNetworkTag',
};

const RECORD_FIELDS = new Set(['name', 'description', 'location', 'status', 'price_model']);

/** A Shape A record (`/api/cloud/cluster/{name}/`) as a {@link Cluster}. */
export function clusterFromA(wire: ClusterAWire): Cluster {
  return {
    ...common(wire),
    status: wire.status,
    prices: prices(wire.price_model, A_FIELDS),
    shape: 'A',
  };
}

/** A Shape B record (list, `/cloud/cluster/{name}/`) as a {@link Cluster}. */
export function clusterFromB(wire: ClusterBWire): Cluster {
  return { ...common(wire), prices: prices(wire.price_model, B_FIELDS), shape: 'B' };
}

function common(wire: ClusterAWire | ClusterBWire) {
  const extra: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(wire)) if (!RECORD_FIELDS.has(key)) extra[key] = value;
  return { name: wire.name, description: wire.description ?? '', location: wire.location ?? '', extra };
}

function prices(model: Record<string, unknown>, fields: Record<string, Named>): PriceModel {
  const out: PriceModel = { other: {} };
  for (const [key, value] of Object.entries(model)) {
    if (value === null || value === undefined) continue;
    // Unknown fields are kept as sent; a non-string one keeps its JSON text rather than being dropped.
    const text = typeof value === 'string' ? value : JSON.stringify(value);
    const named = fields[key];
    if (named) out[named] = text;
    else out.other[key] = text;
  }
  return out;
}
