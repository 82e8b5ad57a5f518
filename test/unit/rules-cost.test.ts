import { describe, expect, it } from 'vitest';
import { clusterFromA, clusterFromB } from '../../src/cloud/normalise.ts';
import { clusterASchema, clusterBSchema } from '../../src/cloud/schemas.ts';
import {
  type CostedSize,
  costDifference,
  HOURS_PER_MONTH,
  publicIpFor,
  rankReferenceCosts,
  referenceVmCost,
  sizeAfter,
  vmCost,
} from '../../src/rules/cost.ts';
import { Decimal, DecimalError, percentChange } from '../../src/rules/decimal.ts';
import type { PriceLike, ReferenceVm } from '../../src/rules/types.ts';

const d = (text: string) => Decimal.parse(text);

describe('Decimal', () => {
  it('adds 0.1 and 0.2 to exactly 0.3, where binary floats do not', () => {
    expect(0.1 + 0.2).not.toBe(0.3);
    const sum = d('0.1').add(d('0.2'));
    expect(sum.toString()).toBe('0.3');
    expect(sum.equals(d('0.3'))).toBe(true);
    expect(sum.compare(d('0.30000000000000004'))).toBe(-1);
  });

  it('parses the shapes prices come in and keeps every digit', () => {
    expect(d('0.0123').toString()).toBe('0.0123');
    expect(d(' 12 ').toString()).toBe('12');
    expect(d('.5').toString()).toBe('0.5');
    expect(d('-3.50').toString()).toBe('-3.5');
    expect(d('0.000000000000000000000001').mul(3).toString()).toBe('0.000000000000000000000003');
    expect(d('+7.25').toFixed(2)).toBe('7.25');
  });

  it.each(['', ' ', '-', '.', '1e-3', '1,5', 'NaN', 'Infinity', '0x10', '1.2.3', '€1.00', '1 000'])(
    'refuses the malformed string %j with a DecimalError naming it',
    (text) => {
      expect(() => Decimal.parse(text)).toThrow(DecimalError);
      expect(() => Decimal.parse(text)).toThrow(/not a decimal number/);
    },
  );

  it('refuses floats where a whole number is expected', () => {
    expect(() => d('1').mul(0.5)).toThrow(DecimalError);
    expect(() => Decimal.fromInteger(Number.NaN)).toThrow(DecimalError);
  });

  it('multiplies by whole numbers and by decimals exactly', () => {
    expect(d('0.0123').mul(4).toString()).toBe('0.0492');
    expect(d('0.0123').mul(d('2.5')).toString()).toBe('0.03075');
    expect(d('0.0137').mul(730).toString()).toBe('10.001');
    expect(d('-0.5').mul(-3).toString()).toBe('1.5');
  });

  it('subtracts, compares and signs', () => {
    expect(d('1.00').sub(d('0.01')).toString()).toBe('0.99');
    expect(d('0.1').sub(d('0.3')).toString()).toBe('-0.2');
    expect(d('2').compare(d('2.000'))).toBe(0);
    expect(d('-0.001').sign()).toBe(-1);
    expect(Decimal.ZERO.isZero()).toBe(true);
    expect(Decimal.sum([d('0.1'), d('0.2'), d('0.3')]).toString()).toBe('0.6');
  });

  it('rounds half up (away from zero) in toFixed and pads to the places asked', () => {
    expect(d('2.345').toFixed(2)).toBe('2.35');
    expect(d('2.344999').toFixed(2)).toBe('2.34');
    expect(d('-2.345').toFixed(2)).toBe('-2.35');
    expect(d('0.00005').toFixed(4)).toBe('0.0001');
    expect(d('0.00004').toFixed(4)).toBe('0.0000');
    expect(d('9.995').toFixed(2)).toBe('10.00');
    expect(d('3').toFixed(4)).toBe('3.0000');
    expect(d('1.5').toFixed(0)).toBe('2');
    expect(d('-0.001').toFixed(2)).toBe('0.00');
  });

  it('gives a percentage change with one decimal, half up, and none from zero', () => {
    expect(percentChange(d('0.0100'), d('0.0115'))).toBe('15.0');
    expect(percentChange(d('3'), d('2'))).toBe('-33.3');
    expect(percentChange(d('3'), d('4'))).toBe('33.3');
    expect(percentChange(d('0.06'), d('0.0601'))).toBe('0.2');
    expect(percentChange(d('8'), d('8.004'))).toBe('0.1');
    expect(percentChange(d('8'), d('7.996'))).toBe('-0.1');
    expect(percentChange(d('1'), d('1'))).toBe('0.0');
    expect(percentChange(d('0'), d('1'))).toBeUndefined();
  });
});

/** Shape B-normalised prices of a cluster (what `PriceModel` carries). */
const PRICES: PriceLike = {
  vcoreRegular: '0.0125',
  vcoreLight: '0.0070',
  ram: '0.0050',
  storageFast: '0.00020',
  publicIp: '0.0040',
  privateNetworkTag: '0.0010',
};

const size = (over: Partial<CostedSize> = {}): CostedSize => ({
  cores: 2,
  ramGb: 4,
  osDiskGb: 50,
  cpuClass: 'regular',
  publicIp: 1,
  privateNetwork: false,
  ...over,
});

describe('vmCost', () => {
  it('adds cores, RAM, disk and public IP at the hourly prices and multiplies by 730 h for the month', () => {
    // 2 × 0.0125 + 4 × 0.0050 + 50 × 0.00020 + 1 × 0.0040 = 0.025 + 0.02 + 0.01 + 0.004 = 0.059
    const cost = vmCost(PRICES, size());
    expect(cost.hourly.toString()).toBe('0.059');
    expect(HOURS_PER_MONTH).toBe(730);
    expect(cost.monthly.toString()).toBe('43.07');
    expect(cost.monthly.toFixed(2)).toBe('43.07');
    expect(cost.hourly.toFixed(4)).toBe('0.0590');
    expect(cost.missing).toEqual([]);
    expect(cost.lines.map((l) => [l.price, l.quantity, l.hourly.toString()])).toEqual([
      ['vcore_regular', 2, '0.025'],
      ['ram', 4, '0.02'],
      ['storage_fast', 50, '0.01'],
      ['public_ip', 1, '0.004'],
    ]);
  });

  it('prices light cores at vcore_light and counts a private network tag once', () => {
    const cost = vmCost(PRICES, size({ cpuClass: 'light', publicIp: 0, privateNetwork: true }));
    // 2 × 0.0070 + 0.02 + 0.01 + 0.0010
    expect(cost.hourly.toString()).toBe('0.045');
  });

  it('is exact where floats drift: 3 cores at 0.1 is 0.3, and a month of 0.0137/h is 10.001', () => {
    const prices: PriceLike = { vcoreRegular: '0.1', ram: '0', storageFast: '0', publicIp: '0' };
    expect(vmCost(prices, size({ cores: 3, publicIp: 0 })).hourly.toString()).toBe('0.3');
    const month = vmCost(
      { vcoreRegular: '0.0137', ram: '0', storageFast: '0' },
      size({ cores: 1, publicIp: 0 }),
    );
    expect(month.monthly.toString()).toBe('10.001');
    expect(month.monthly.toFixed(2)).toBe('10.00');
  });

  it('counts a missing or malformed price as 0 and names it, but never one that is not needed', () => {
    const prices: PriceLike = { vcoreRegular: '0.0125', ram: 'n/a', storageFast: '0.00020' };
    const cost = vmCost(prices, size({ publicIp: 0 }));
    expect(cost.missing).toEqual(['ram']);
    expect(cost.hourly.toString()).toBe('0.035');
    const withIp = vmCost(prices, size({ publicIp: 1 }));
    expect(withIp.missing).toEqual(['ram', 'public_ip']);
    expect(vmCost(prices, size({ cpuClass: 'light', publicIp: 0 })).missing).toEqual(['vcore_light', 'ram']);
  });

  it('accepts the cloud layer’s PriceModel as it is (extra fields kept, not required)', () => {
    const model = { ...PRICES, vcoreOff: '0.001', other: { pbs_pool: '0.3', vcore_25: '0.003' } };
    expect(vmCost(model, size()).hourly.toString()).toBe('0.059');
  });
});

describe('vmCost on Shape A and Shape B records', () => {
  const shared = { ram: '0.0040', storage_fast: '0.00015', public_ip: '0.0050', pbs_pool: '0.0040' };
  const a = clusterFromA(
    clusterASchema.parse({
      name: 'zone-1',
      description: '',
      status: 'active',
      location: 'Frankfurt',
      price_model: { vcore: '0.0120', vcore_50: '0.0060', vcore_25: '0.0030', ...shared },
    }),
  );
  const b = clusterFromB(
    clusterBSchema.parse({
      name: 'zone-1',
      description: '',
      location: 'Frankfurt',
      price_model: { vcore_regular: '0.0120', vcore_light: '0.0060', ...shared },
    }),
  );

  it('costs the same cluster the same from either shape, for both CPU classes', () => {
    for (const cpuClass of ['regular', 'light'] as const) {
      const fromA = vmCost(a.prices, size({ cpuClass }));
      const fromB = vmCost(b.prices, size({ cpuClass }));
      expect(fromA.missing).toEqual([]);
      expect(fromA.hourly.toString()).toBe(fromB.hourly.toString());
    }
    // 2 × 0.0120 + 4 × 0.0040 + 50 × 0.00015 + 0.0050 = 0.0525
    expect(vmCost(a.prices, size()).hourly.toString()).toBe('0.0525');
    expect(vmCost(a.prices, size()).monthly.toFixed(2)).toBe('38.33');
  });
});

describe('publicIpFor', () => {
  it('bills one public IPv4 address for ipv4 and dual, none for off and ipv6', () => {
    expect([publicIpFor('off'), publicIpFor('ipv4'), publicIpFor('ipv6'), publicIpFor('dual')]).toEqual([
      0, 1, 0, 1,
    ]);
  });
});

describe('costDifference', () => {
  it('gives after minus before, hourly and monthly, with the percentage', () => {
    const diff = costDifference(PRICES, size(), size({ cores: 4, ramGb: 8 }));
    // + 2 × 0.0125 + 4 × 0.0050 = +0.045/h
    expect(diff.hourly.toString()).toBe('0.045');
    expect(diff.monthly.toString()).toBe('32.85');
    expect(diff.after.hourly.toString()).toBe('0.104');
    expect(diff.percent).toBe('76.3');
  });

  it('is negative for a downsize and zero for the same size', () => {
    const down = costDifference(PRICES, size({ cores: 4 }), size({ cores: 2 }));
    expect(down.hourly.toFixed(4)).toBe('-0.0250');
    expect(down.monthly.toFixed(2)).toBe('-18.25');
    expect(costDifference(PRICES, size(), size()).hourly.isZero()).toBe(true);
  });

  it('names the missing prices of either side once', () => {
    const prices: PriceLike = { vcoreRegular: '0.01', ram: '0.005', storageFast: '0.0002' };
    const diff = costDifference(prices, size({ publicIp: 1 }), size({ cpuClass: 'light', publicIp: 1 }));
    expect(diff.missing).toEqual(['public_ip', 'vcore_light']);
  });
});

describe('reference VM', () => {
  const reference: ReferenceVm = {
    cores: 2,
    ram_gb: 4,
    os_disk_gb: 50,
    cpu_class: 'regular',
    public_ip: true,
  };

  it('costs the policy’s reference VM like any size', () => {
    expect(referenceVmCost(PRICES, reference).hourly.toString()).toBe('0.059');
    expect(referenceVmCost(PRICES, { ...reference, public_ip: false }).hourly.toString()).toBe('0.055');
  });

  it('marks the cheapest complete cluster (all of them on a tie), never one with a missing price', () => {
    const clusters = [
      { name: 'zone-1', prices: PRICES },
      { name: 'zone-2', prices: { ...PRICES, vcoreRegular: '0.0100' } },
      { name: 'zone-3', prices: { ...PRICES, vcoreRegular: '0.0100' } },
      { name: 'zone-4', prices: { vcoreRegular: '0.0001' } },
    ];
    const ranked = rankReferenceCosts(clusters, reference);
    expect(ranked.map((r) => [r.item.name, r.cost.hourly.toString(), r.cheapest])).toEqual([
      ['zone-1', '0.059', false],
      ['zone-2', '0.054', true],
      ['zone-3', '0.054', true],
      ['zone-4', '0.0002', false],
    ]);
    expect(rankReferenceCosts([], reference)).toEqual([]);
  });
});

describe('sizeAfter', () => {
  const vm = { vmid: 101, ha: false, cores: 2, ramGb: 4, osDiskGb: 50, wanMode: 'ipv4' as const };

  it('applies the target over what is known, keeping the rest', () => {
    expect(sizeAfter(vm, { cores: 4, wanMode: 'off' })).toEqual({
      cores: 4,
      ramGb: 4,
      osDiskGb: 50,
      cpuClass: 'regular',
      publicIp: 0,
      privateNetwork: false,
    });
    expect(sizeAfter(vm, {})).toMatchObject({ cores: 2, publicIp: 1 });
  });

  it('is undefined while cores, RAM or disk stay unknown', () => {
    expect(sizeAfter({ vmid: 101, ha: false, cores: 2 }, { ramGb: 8 })).toBeUndefined();
    expect(sizeAfter({ vmid: 101, ha: false }, { cores: 2, ramGb: 8, osDiskGb: 20 })).toMatchObject({
      osDiskGb: 20,
    });
  });
});
