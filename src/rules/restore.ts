import { checkBackupSlug } from './inputs.ts';
import type { Violation, VmKnown } from './types.ts';

/** A restore as the modal submitted it. */
export interface RestoreCheckInput {
  vm: VmKnown;
  /** The VM id chosen in the form. */
  vmid: number;
  /** The VM id typed again to confirm the overwrite, as typed. */
  typedVmid: string;
  backupSlug: string;
  autostart: boolean;
  /** The requester confirmed the VM is stopped. */
  confirmedStopped: boolean;
}

/**
 * Checks a restore (docs/requests.md#the-rules, rules 5 and 6): the VM confirmed stopped, its id typed again, a well-formed
 * backup slug, and no autostart for a high-availability VM. Returns every refusal; empty means it may be asked.
 */
export function checkRestore(input: RestoreCheckInput): Violation[] {
  const violations: Violation[] = [];
  if (!input.confirmedStopped) {
    violations.push({
      field: 'confirmStopped',
      code: 'needs_stopped',
      message: 'A restore needs the VM stopped: stop the VM, then tick “The VM is stopped”.',
    });
  }
  const typed = input.typedVmid.trim();
  if (typed !== String(input.vmid)) {
    violations.push({
      field: 'typedVmid',
      code: 'typed_vmid_mismatch',
      message: `Type the VM id ${input.vmid} again, exactly, to confirm that its disk is overwritten${typed ? ` (typed: "${typed.slice(0, 24)}")` : ''}.`,
    });
  }
  const slug = checkBackupSlug(input.backupSlug);
  if (slug) violations.push(slug);
  if (input.autostart && input.vm.ha) {
    violations.push({
      field: 'autostart',
      code: 'autostart_ha',
      message: `Autostart is not allowed for VM ${input.vmid}: it is a high-availability VM. Untick it and start the VM after the restore.`,
    });
  }
  return violations;
}
