import type { ResizeBody } from '../cloud/types.ts';
import type { Policy } from '../config/policy.ts';
import { CPU_CLASSES, ON_OFF, type ResizeTarget } from '../rules/types.ts';

/** A step asks for a field the policy does not map to the API (it was removed after the request was made). */
export class UnmappedFieldError extends Error {
  override readonly name = 'UnmappedFieldError';
  readonly code = 'UNMAPPED_FIELD';
}

/**
 * The API body for one resize step: the documented fields by their wire names, and CPU class / private network
 * only through the field name and values `policy.resize_fields` configures.
 */
export function resizeBody(step: ResizeTarget, fields: Policy['resize_fields']): ResizeBody {
  const body: ResizeBody = {};
  if (step.cores !== undefined) body.cores = step.cores;
  if (step.ramGb !== undefined) body.ram_gb = step.ramGb;
  if (step.osDiskGb !== undefined) body.os_disk_gb = step.osDiskGb;
  if (step.wanMode !== undefined) body.wan_mode = step.wanMode;
  if (step.cpuClass !== undefined) {
    const mapping = fields.cpu_class;
    const value = mapping?.values[CPU_CLASSES.indexOf(step.cpuClass)];
    if (!mapping || value === undefined) {
      throw new UnmappedFieldError(
        'CPU class is not configured for this API (policy resize_fields.cpu_class).',
      );
    }
    body[mapping.field] = value;
  }
  if (step.privateNetwork !== undefined) {
    const mapping = fields.private_network;
    const value = mapping?.values[ON_OFF.indexOf(step.privateNetwork)];
    if (!mapping || value === undefined) {
      throw new UnmappedFieldError(
        'Private network is not configured for this API (policy resize_fields.private_network).',
      );
    }
    body[mapping.field] = value;
  }
  return body;
}
