import type { App } from '@slack/bolt';
import { parseCpuClass, parseOnOff, parseWanMode, parseWholeNumber } from '../../rules/inputs.ts';
import { checkResize } from '../../rules/resize.ts';
import type { ResizeTarget, Violation } from '../../rules/types.ts';
import type { SlackDeps } from '../deps.ts';
import { flag, input, registerStep, STEP_IDS, sentence } from './common.ts';

/** "Request a VM resize": the slash command's resize as a Workflow Builder step, checked by the same rules. */
export function register(app: App, deps: SlackDeps): void {
  registerStep(app, deps, STEP_IDS.resize, async (start, inputs) => {
    const { limits, resize_fields } = deps.policy;
    const violations: Violation[] = [];
    const read = <T>(name: string, parse: (raw: string) => T | Violation): T | undefined => {
      const raw = input(inputs, name);
      if (raw === undefined) return undefined;
      const parsed = parse(raw);
      if (typeof parsed === 'object' && parsed !== null && 'code' in parsed) {
        violations.push(parsed as Violation);
        return undefined;
      }
      return parsed as T;
    };
    const target: ResizeTarget = {
      cores: read('cores', (raw) => parseWholeNumber(raw, 'cores', limits.cores)),
      ramGb: read('ram_gb', (raw) => parseWholeNumber(raw, 'ramGb', limits.ram_gb)),
      osDiskGb: read('os_disk_gb', (raw) => parseWholeNumber(raw, 'osDiskGb', limits.os_disk_gb)),
      cpuClass: read('cpu_class', parseCpuClass),
      wanMode: read('wan', parseWanMode),
      privateNetwork: read('private_network', parseOnOff),
    };
    for (const key of Object.keys(target) as (keyof ResizeTarget)[]) {
      if (target[key] === undefined) delete target[key];
    }
    if (violations.length > 0) return sentence(violations);
    const confirmedStopped = flag(inputs, 'vm_stopped');
    const check = checkResize({
      vm: start.vm,
      target,
      limits: { cores: limits.cores, ramGb: limits.ram_gb, osDiskGb: limits.os_disk_gb },
      configured: {
        cpuClass: resize_fields.cpu_class !== undefined,
        privateNetwork: resize_fields.private_network !== undefined,
      },
      confirmedStopped,
      // A workflow asks for the target mode; the request message shows the two steps to its approvers.
      acceptWanTwoStep: true,
      now: deps.now(),
    });
    // The 24-hour wait included: a step cannot be offered a later run, it fails with the time it is allowed.
    if (check.violations.length > 0) return sentence(check.violations);
    return deps.requests.createResize(start.origin, {
      project: start.project,
      vm: start.vm,
      target,
      check,
      confirmedStopped,
      reason: start.reason,
    });
  });
}
