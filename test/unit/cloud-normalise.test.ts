import { describe, expect, it } from 'vitest';
import { clusterFromA, clusterFromB } from '../../src/cloud/normalise.ts';
import { clusterASchema, clusterBSchema, clusterListSchema } from '../../src/cloud/schemas.ts';

const shapeA = {
  name: 'zone-1',
  description: 'Zone 1',
  status: 'active',
  location: 'Frankfurt',
  price_model: {
    vcore: '0.0120',
    vcore_50: '0.0060',
    vcore_25: '0.0030',
    vcore_off: '0.0010',
    ram: '0.0040',
    ram_off: '0.0005',
    storage_fast: '0.00015',
    public_ip: '0.0050',
    private_network_tag: '0.0020',
    private_network_external_vlan: '0.0100',
    cloud_gateway_standard: '0.0300',
    pbs_pool: '0.0040',
  },
};

const shapeB = {
  name: 'zone-1',
  description: 'Zone 1',
  location: 'Frankfurt',
  price_model: {
    vcore_regular: '0.0120',
    vcore_light: '0.0060',
    vcore_off: '0.0010',
    ram: '0.0040',
    ram_off: '0.0005',
    storage_fast: '0.00015',
    public_ip: '0.0050',
    private_network_tag: '0.0020',
    private_network_external_vlan: '0.0100',
    cloud_gateway_standard: '0.0300',
    pbs_pool: '0.0040',
  },
};

describe('Shape A and Shape B → one Cluster model', () => {
  it('gives the same named prices from both shapes, strings untouched', () => {
    const a = clusterFromA(clusterASchema.parse(shapeA));
    const b = clusterFromB(clusterBSchema.parse(shapeB));
    const named = (c: typeof a) => {
      const { other: _other, ...rest } = c.prices;
      return rest;
    };
    expect(named(a)).toEqual(named(b));
    expect(named(a)).toEqual({
      vcoreRegular: '0.0120',
      vcoreLight: '0.0060',
      vcoreOff: '0.0010',
      ram: '0.0040',
      ramOff: '0.0005',
      storageFast: '0.00015',
      publicIp: '0.0050',
      privateNetworkTag: '0.0020',
    });
    expect(a).toMatchObject({
      name: 'zone-1',
      description: 'Zone 1',
      location: 'Frankfurt',
      status: 'active',
      shape: 'A',
    });
    expect(b).toMatchObject({ name: 'zone-1', shape: 'B' });
    expect(b.status).toBeUndefined();
  });

  it('keeps the other documented price fields under their wire names', () => {
    const a = clusterFromA(clusterASchema.parse(shapeA));
    expect(a.prices.other).toEqual({
      vcore_25: '0.0030',
      private_network_external_vlan: '0.0100',
      cloud_gateway_standard: '0.0300',
      pbs_pool: '0.0040',
    });
    const b = clusterFromB(clusterBSchema.parse(shapeB));
    expect(b.prices.other).toEqual({
      private_network_external_vlan: '0.0100',
      cloud_gateway_standard: '0.0300',
      pbs_pool: '0.0040',
    });
  });

  it('keeps unknown record and price fields instead of dropping them', () => {
    const wire = {
      ...shapeB,
      features: ['gpu'],
      accepts_new_projects: true,
      price_model: { ...shapeB.price_model, gpu_hour: '0.9000', weird_number: 1.5 },
    };
    const parsed = clusterListSchema.parse([wire]);
    const cluster = clusterFromB(parsed[0]!);
    expect(cluster.extra).toEqual({ features: ['gpu'], accepts_new_projects: true });
    expect(cluster.prices.other.gpu_hour).toBe('0.9000');
    expect(cluster.prices.other.weird_number).toBe('1.5');
  });

  it('tolerates null descriptions and prices, and refuses a record without a price model', () => {
    const cluster = clusterFromB(
      clusterBSchema.parse({
        ...shapeB,
        description: null,
        price_model: { ...shapeB.price_model, vcore_light: null },
      }),
    );
    expect(cluster.description).toBe('');
    expect(cluster.prices.vcoreLight).toBeUndefined();
    expect(clusterBSchema.safeParse({ name: 'zone-1' }).success).toBe(false);
    expect(clusterASchema.safeParse(shapeB).success).toBe(false);
    expect(
      clusterBSchema.safeParse({ ...shapeB, price_model: { ...shapeB.price_model, ram: 4 } }).success,
    ).toBe(false);
  });
});
