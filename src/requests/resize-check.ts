import type { Policy } from '../config/policy.ts';
import { checkResize, type ResizeCheck, type ResizeCheckInput } from '../rules/resize.ts';
import type { SizeLimits } from '../rules/types.ts';

/** The policy's limits on typed numbers, in the rules' words. */
export function sizeLimits(policy: Policy): SizeLimits {
  return { cores: policy.limits.cores, ramGb: policy.limits.ram_gb, osDiskGb: policy.limits.os_disk_gb };
}

/**
 * A resize checked under this policy: its limits and which optional fields its API takes. Every place that checks
 * a resize (the modal, a scheduled run, the CLI plan, a lease's return) goes through here.
 */
export function checkResizeUnder(
  policy: Policy,
  input: Omit<ResizeCheckInput, 'limits' | 'configured'>,
): ResizeCheck {
  return checkResize({
    ...input,
    limits: sizeLimits(policy),
    configured: {
      cpuClass: policy.resize_fields.cpu_class !== undefined,
      privateNetwork: policy.resize_fields.private_network !== undefined,
    },
  });
}
