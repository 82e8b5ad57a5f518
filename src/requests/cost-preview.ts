import type { PriceSource } from '../cloud/price-cache.ts';
import type { ProjectPolicy } from '../config/policy.ts';
import type { Logger } from '../observability/logger.ts';
import { costDifference, sizeAfter, vmCost } from '../rules/cost.ts';
import type { ResizeTarget, VmKnown } from '../rules/types.ts';
import type { CostPreview } from './model/types.ts';

/**
 * The hourly and monthly cost after a resize and the difference, or a note saying why it cannot be shown; nothing
 * when the project names no cluster. Prices come from the cached cluster list; a failure to read it is a note.
 * With `leaseReturn` (a temporary increase), also what the size after costs per hour over the size it returns to.
 */
export async function costPreview(
  deps: { prices: PriceSource; currency: string; logger: Logger },
  project: ProjectPolicy,
  vm: VmKnown,
  target: ResizeTarget,
  leaseReturn?: ResizeTarget,
): Promise<{ preview?: CostPreview; note?: string } | undefined> {
  if (!project.cluster) return undefined;
  const after = sizeAfter(vm, target);
  if (!after) {
    return {
      note: 'Cost not shown: the VM’s current cores, RAM or disk are not known to the bot (add them to the policy file).',
    };
  }
  let prices: Awaited<ReturnType<PriceSource['clusterPrices']>>;
  try {
    prices = await deps.prices.clusterPrices(project.cluster);
  } catch (error) {
    deps.logger.warn({ err: error, cluster: project.cluster }, 'prices unavailable for the cost preview');
    return { note: `Cost not shown: the prices of ${project.cluster} could not be read just now.` };
  }
  if (!prices)
    return { note: `Cost not shown: cluster ${project.cluster} is not in the active cluster list.` };
  const cost = vmCost(prices, after);
  const preview: CostPreview = {
    cluster: project.cluster,
    currency: deps.currency,
    hourly: cost.hourly.toFixed(4),
    monthly: cost.monthly.toFixed(2),
  };
  const before = sizeAfter(vm, {});
  const diff = before ? costDifference(prices, before, after) : undefined;
  // A difference with a price nobody knows is no difference at all: it satisfies no cost bound and no cost rule.
  if (diff && diff.missing.length === 0) {
    preview.diffHourly = diff.hourly.toFixed(4);
    preview.diffMonthly = diff.monthly.toFixed(2);
  }
  const back = leaseReturn ? sizeAfter(vm, { ...target, ...leaseReturn }) : undefined;
  const lease = back ? costDifference(prices, back, after) : undefined;
  if (lease && lease.missing.length === 0) preview.leaseHourly = lease.hourly.toFixed(4);
  const missing = [...new Set([...cost.missing, ...(diff?.missing ?? [])])];
  if (missing.length > 0)
    preview.note =
      `Prices unknown for ${missing.join(', ')} (missing, malformed or negative in the API's answer); counted as 0. ${diff ? 'The difference is not known: no cost rule or limit is met by it.' : ''}`.trimEnd();
  return { preview };
}
