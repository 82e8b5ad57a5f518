import { describe, expect, it } from 'vitest';
import { checkRestore, type RestoreCheckInput } from '../../src/rules/restore.ts';

const OK: RestoreCheckInput = {
  vm: { vmid: 102, ha: false },
  vmid: 102,
  typedVmid: '102',
  backupSlug: 'daily-2025-03-01',
  autostart: false,
  confirmedStopped: true,
};

const codes = (input: Partial<RestoreCheckInput>) =>
  checkRestore({ ...OK, ...input }).map((v) => `${v.field}:${v.code}`);

describe('checkRestore', () => {
  it('passes a stopped VM with its id typed again and a well-formed slug', () => {
    expect(checkRestore(OK)).toEqual([]);
    expect(checkRestore({ ...OK, typedVmid: ' 102 ', autostart: true })).toEqual([]);
  });

  it('needs the VM confirmed stopped', () => {
    const [violation] = checkRestore({ ...OK, confirmedStopped: false });
    expect(violation).toMatchObject({ field: 'confirmStopped', code: 'needs_stopped' });
    expect(violation?.message).toMatch(/stop the VM, then tick “The VM is stopped”/);
  });

  it.each(['', '1020', '10', '101', 'one-oh-two'])('refuses the typed VM id %j for VM 102', (typed) => {
    const [violation] = checkRestore({ ...OK, typedVmid: typed });
    expect(violation).toMatchObject({ field: 'typedVmid', code: 'typed_vmid_mismatch' });
    expect(violation?.message).toMatch(/Type the VM id 102 again/);
  });

  it('refuses autostart for a high-availability VM and says what to do instead', () => {
    const [violation] = checkRestore({ ...OK, vm: { vmid: 102, ha: true }, autostart: true });
    expect(violation).toMatchObject({ field: 'autostart', code: 'autostart_ha' });
    expect(violation?.message).toMatch(/high-availability.*Untick it/);
    expect(checkRestore({ ...OK, vm: { vmid: 102, ha: true }, autostart: false })).toEqual([]);
  });

  it.each(['', '..', 'a/b', '../../etc/passwd', 'snap shot'])('refuses the slug %j', (slug) => {
    expect(codes({ backupSlug: slug })).toEqual(['backupSlug:bad_slug']);
  });

  it('reports every problem at once so the modal shows them together', () => {
    expect(
      codes({
        vm: { vmid: 102, ha: true },
        autostart: true,
        typedVmid: '',
        backupSlug: '..',
        confirmedStopped: false,
      }),
    ).toEqual([
      'confirmStopped:needs_stopped',
      'typedVmid:typed_vmid_mismatch',
      'backupSlug:bad_slug',
      'autostart:autostart_ha',
    ]);
  });
});
