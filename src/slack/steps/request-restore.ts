import type { App } from '@slack/bolt';
import { checkRestore } from '../../rules/restore.ts';
import type { SlackDeps } from '../deps.ts';
import { flag, input, registerStep, STEP_IDS, sentence } from './common.ts';

/** "Request a VM restore": the slash command's restore as a Workflow Builder step, checked by the same rules. */
export function register(app: App, deps: SlackDeps): void {
  registerStep(app, deps, STEP_IDS.restore, async (start, inputs) => {
    const backupSlug = input(inputs, 'backup') ?? '';
    const autostart = flag(inputs, 'autostart');
    const violations = checkRestore({
      vm: start.vm,
      vmid: start.vmid,
      // The step's VM id input is the confirmation the modal asks to type again.
      typedVmid: String(start.vmid),
      backupSlug,
      autostart,
      confirmedStopped: flag(inputs, 'vm_stopped'),
    });
    if (violations.length > 0) return sentence(violations);
    return deps.requests.createRestore(start.origin, {
      project: start.project,
      vm: start.vm,
      backupSlug,
      autostart,
      reason: start.reason,
    });
  });
}
