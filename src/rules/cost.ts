import { Decimal, DecimalError, percentChange } from './decimal.ts';
import type { CpuClass, PriceLike, ReferenceVm, ResizeTarget, VmKnown, WanMode } from './types.ts';

/** Hours in the "monthly" figure (docs/requests.md#prices): 365 × 24 / 12. */
export const HOURS_PER_MONTH = 730;

/** A VM size as the cost rules price it. */
export interface CostedSize {
  cores: number;
  ramGb: number;
  osDiskGb: number;
  cpuClass: CpuClass;
  /** Public IP addresses billed, see {@link publicIpFor}. */
  publicIp: number;
  /** Whether a private network tag is attached (billed once, `private_network_tag`). */
  privateNetwork: boolean;
}

/** One priced item of a size: quantity × unit price (hourly). */
export interface CostLine {
  /** The price field's wire name (Shape B spelling), e.g. `vcore_regular`. */
  price: string;
  quantity: number;
  /** The unit price as the API sent it; undefined when the cluster does not list it. */
  unit?: Decimal;
  hourly: Decimal;
}

/** The cost of a size in one cluster. Prices the cluster lacks are counted 0 and named in `missing`. */
export interface VmCost {
  hourly: Decimal;
  /** `hourly` × {@link HOURS_PER_MONTH}. */
  monthly: Decimal;
  /** Wire names of prices that were needed but unknown: absent, not a number, or negative. */
  missing: string[];
  lines: CostLine[];
}

/** After minus before, for the request message. */
export interface CostDifference {
  hourly: Decimal;
  monthly: Decimal;
  before: VmCost;
  after: VmCost;
  /** Percentage change of the hourly cost with one decimal, undefined when the cost before is 0. */
  percent?: string;
  /** Missing prices of either size, once each. */
  missing: string[];
}

/**
 * Public IP addresses billed for a WAN mode. Assumed (the spec prices `public_ip` but does not say what it
 * counts): one per public IPv4 address, since IPv6 addresses are not scarce and are not billed by hosts of this
 * kind. So off 0, ipv4 1, ipv6 0, dual 1.
 */
export function publicIpFor(wanMode: WanMode): number {
  return wanMode === 'ipv4' || wanMode === 'dual' ? 1 : 0;
}

const VCORE_PRICE: Record<CpuClass, { key: keyof PriceLike; wire: string }> = {
  regular: { key: 'vcoreRegular', wire: 'vcore_regular' },
  light: { key: 'vcoreLight', wire: 'vcore_light' },
};

function unitPrice(prices: PriceLike, key: keyof PriceLike): Decimal | undefined {
  const raw = prices[key];
  if (raw === undefined) return undefined;
  let price: Decimal;
  try {
    price = Decimal.parse(raw);
  } catch (error) {
    // A malformed price is as good as absent: it is reported in `missing`, never guessed.
    if (error instanceof DecimalError) return undefined;
    throw error;
  }
  // A negative price is not a price: unknown too, so no cost comes out negative.
  return price.sign() < 0 ? undefined : price;
}

/**
 * Hourly and monthly cost of a size: cores × the vCore price of its class + RAM GB × `ram` + OS disk GB ×
 * `storage_fast` + public IPs × `public_ip` + `private_network_tag` when a private network is attached.
 */
export function vmCost(prices: PriceLike, size: CostedSize): VmCost {
  const vcore = VCORE_PRICE[size.cpuClass];
  const items: { key: keyof PriceLike; wire: string; quantity: number }[] = [
    { key: vcore.key, wire: vcore.wire, quantity: size.cores },
    { key: 'ram', wire: 'ram', quantity: size.ramGb },
    { key: 'storageFast', wire: 'storage_fast', quantity: size.osDiskGb },
    { key: 'publicIp', wire: 'public_ip', quantity: size.publicIp },
    { key: 'privateNetworkTag', wire: 'private_network_tag', quantity: size.privateNetwork ? 1 : 0 },
  ];
  const lines: CostLine[] = [];
  const missing: string[] = [];
  for (const item of items) {
    // A price that is not needed (quantity 0) is neither counted nor reported missing.
    if (item.quantity === 0) continue;
    const unit = unitPrice(prices, item.key);
    if (!unit) missing.push(item.wire);
    lines.push({
      price: item.wire,
      quantity: item.quantity,
      unit,
      hourly: unit ? unit.mul(item.quantity) : Decimal.ZERO,
    });
  }
  const hourly = Decimal.sum(lines.map((l) => l.hourly));
  return { hourly, monthly: hourly.mul(HOURS_PER_MONTH), missing, lines };
}

/** The cost of `after` minus the cost of `before`, in the same cluster. */
export function costDifference(prices: PriceLike, before: CostedSize, after: CostedSize): CostDifference {
  const was = vmCost(prices, before);
  const will = vmCost(prices, after);
  const hourly = will.hourly.sub(was.hourly);
  return {
    hourly,
    monthly: will.monthly.sub(was.monthly),
    before: was,
    after: will,
    percent: percentChange(was.hourly, will.hourly),
    missing: [...new Set([...was.missing, ...will.missing])],
  };
}

/** The policy's reference VM as a costed size. */
export function referenceSize(reference: ReferenceVm): CostedSize {
  return {
    cores: reference.cores,
    ramGb: reference.ram_gb,
    osDiskGb: reference.os_disk_gb,
    cpuClass: reference.cpu_class,
    publicIp: reference.public_ip ? 1 : 0,
    privateNetwork: false,
  };
}

/** What the reference VM costs in one cluster (digest, `/cloud clusters`). */
export function referenceVmCost(prices: PriceLike, reference: ReferenceVm): VmCost {
  return vmCost(prices, referenceSize(reference));
}

/** A cluster's reference VM cost, with whether it is the cheapest. */
export interface RankedCost<T> {
  item: T;
  cost: VmCost;
  cheapest: boolean;
}

/**
 * Reference VM cost per cluster, in the order given, with the cheapest marked (all of them on a tie). Clusters
 * with a missing price are never marked: their total is understated, so calling them cheapest would mislead.
 */
export function rankReferenceCosts<T extends { prices: PriceLike }>(
  clusters: readonly T[],
  reference: ReferenceVm,
): RankedCost<T>[] {
  const costs = clusters.map((item) => ({ item, cost: referenceVmCost(item.prices, reference) }));
  let lowest: Decimal | undefined;
  for (const { cost } of costs) {
    if (cost.missing.length === 0 && (!lowest || cost.hourly.compare(lowest) < 0)) lowest = cost.hourly;
  }
  return costs.map(({ item, cost }) => ({
    item,
    cost,
    cheapest: lowest !== undefined && cost.missing.length === 0 && cost.hourly.equals(lowest),
  }));
}

/**
 * The size a VM has after `target` is applied to what is known of it (the known size itself for an empty target),
 * or undefined when cores, RAM or disk are not known: a cost needs all three.
 */
export function sizeAfter(vm: VmKnown, target: ResizeTarget): CostedSize | undefined {
  const cores = target.cores ?? vm.cores;
  const ramGb = target.ramGb ?? vm.ramGb;
  const osDiskGb = target.osDiskGb ?? vm.osDiskGb;
  if (cores === undefined || ramGb === undefined || osDiskGb === undefined) return undefined;
  return {
    cores,
    ramGb,
    osDiskGb,
    cpuClass: target.cpuClass ?? vm.cpuClass ?? 'regular',
    publicIp: publicIpFor(target.wanMode ?? vm.wanMode ?? 'off'),
    privateNetwork: (target.privateNetwork ?? vm.privateNetwork) === 'on',
  };
}
