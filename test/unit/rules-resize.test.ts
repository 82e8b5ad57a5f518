import { describe, expect, it } from 'vitest';
import { checkResize, formatUtc, type ResizeCheckInput } from '../../src/rules/resize.ts';
import type { ResizeTarget, VmKnown } from '../../src/rules/types.ts';

const NOW = new Date('2025-03-10T12:00:00Z');
const HOUR = 3_600_000;

const VM: VmKnown = {
  vmid: 101,
  ha: false,
  cores: 4,
  ramGb: 8,
  osDiskGb: 50,
  cpuClass: 'regular',
  wanMode: 'ipv4',
  privateNetwork: 'off',
  createdAt: new Date('2025-01-01T00:00:00Z'),
};

function check(target: ResizeTarget, over: Partial<ResizeCheckInput> = {}) {
  return checkResize({
    vm: VM,
    target,
    limits: { cores: 64, ramGb: 512, osDiskGb: 4096 },
    configured: { cpuClass: true, privateNetwork: true },
    confirmedStopped: false,
    acceptWanTwoStep: false,
    now: NOW,
    ...over,
  });
}

const codes = (c: ReturnType<typeof check>) => c.violations.map((v) => `${v.field}:${v.code}`);

describe('checkResize: increases', () => {
  it('sends only what changes, as one step, and notes the new 24-hour wait', () => {
    const c = check({ cores: 8, ramGb: 8, osDiskGb: 80, wanMode: 'ipv4' });
    expect(c.violations).toEqual([]);
    expect(c.steps).toEqual([{ cores: 8, osDiskGb: 80 }]);
    expect(c.increases).toEqual(['cores', 'osDiskGb']);
    expect(c.decreases).toEqual([]);
    expect(c.directions).toMatchObject({ cores: 'up', ramGb: 'same', osDiskGb: 'up', wanMode: 'same' });
    expect(c.needsStoppedConfirmation).toBe(false);
    expect(c.notes.join('\n')).toMatch(/new 24-hour wait/);
    expect(c.notes.join('\n')).toMatch(/OS disk grows to 80 GB/);
  });

  it('treats light → regular as an increase', () => {
    const c = check({ cpuClass: 'regular' }, { vm: { ...VM, cpuClass: 'light' } });
    expect(c.increases).toEqual(['cpuClass']);
    expect(c.steps).toEqual([{ cpuClass: 'regular' }]);
  });
});

describe('checkResize: the 24-hour rule', () => {
  const recent = { ...VM, lastIncreaseAt: new Date(NOW.getTime() - 3 * HOUR) };

  it('refuses lowering cores within 24 h of an increase, with the UTC time it becomes allowed and what is allowed now', () => {
    const c = check({ cores: 2 }, { vm: recent, confirmedStopped: true });
    expect(codes(c)).toEqual(['cores:cooldown']);
    const allowedAt = new Date(NOW.getTime() + 21 * HOUR);
    expect(c.violations[0]?.allowedAt).toEqual(allowedAt);
    expect(c.earliestAllowedAt).toEqual(allowedAt);
    expect(c.violations[0]?.message).toContain('2025-03-11 09:00 UTC');
    expect(c.violations[0]?.message).toContain('keep 4 cores or more');
    expect(c.violations[0]?.message).toContain('last increased at 2025-03-10 09:00 UTC');
    expect(c.cooldownOnly).toBe(true);
  });

  it('counts from creation when there was no increase, and refuses RAM and CPU class too', () => {
    const fresh = { ...VM, createdAt: new Date(NOW.getTime() - HOUR), lastIncreaseAt: undefined };
    const c = check({ ramGb: 4, cpuClass: 'light' }, { vm: fresh, confirmedStopped: true });
    expect(codes(c)).toEqual(['ramGb:cooldown', 'cpuClass:cooldown']);
    expect(c.violations[0]?.message).toMatch(/was created at/);
    expect(c.violations[1]?.message).toContain('keep the CPU class regular');
    expect(c.decreases).toEqual(['ramGb', 'cpuClass']);
  });

  it('uses the later of creation and last increase', () => {
    const vm = {
      ...VM,
      createdAt: new Date(NOW.getTime() - 2 * HOUR),
      lastIncreaseAt: new Date(NOW.getTime() - 30 * HOUR),
    };
    const c = check({ cores: 2 }, { vm, confirmedStopped: true });
    expect(c.earliestAllowedAt).toEqual(new Date(NOW.getTime() + 22 * HOUR));
  });

  it('allows it at exactly 24 hours, as the scheduled re-check at runAt does', () => {
    const first = check({ cores: 2 }, { vm: recent, confirmedStopped: true });
    const at = first.earliestAllowedAt;
    expect(at).toBeDefined();
    const later = check({ cores: 2 }, { vm: recent, confirmedStopped: true, now: at });
    expect(later.violations).toEqual([]);
    expect(later.steps).toEqual([{ cores: 2 }]);
    expect(later.notes.join('\n')).toMatch(/past the 24-hour wait/);
    const justBefore = check(
      { cores: 2 },
      { vm: recent, confirmedStopped: true, now: new Date((at as Date).getTime() - 1) },
    );
    expect(codes(justBefore)).toEqual(['cores:cooldown']);
  });

  it('does not apply to the OS disk, WAN or private network', () => {
    const c = check({ osDiskGb: 60, wanMode: 'off', privateNetwork: 'on' }, { vm: recent });
    expect(c.violations).toEqual([]);
  });

  it('is not the only refusal when the VM is not confirmed stopped', () => {
    const c = check({ cores: 2 }, { vm: recent });
    expect(codes(c)).toEqual(['cores:cooldown', 'confirmStopped:needs_stopped']);
    expect(c.cooldownOnly).toBe(false);
    expect(c.earliestAllowedAt).toBeDefined();
  });

  it('says the API judges it when the bot knows neither creation nor increase', () => {
    const vm = { ...VM, createdAt: undefined };
    const c = check({ cores: 2 }, { vm, confirmedStopped: true });
    expect(c.violations).toEqual([]);
    expect(c.notes.join('\n')).toMatch(/does not know when this VM was created/);
  });
});

describe('checkResize: lowering needs the VM stopped', () => {
  it('refuses lowering cores or RAM without the confirmation, saying to stop the VM and tick it', () => {
    const c = check({ cores: 2, ramGb: 4 });
    expect(codes(c)).toEqual(['confirmStopped:needs_stopped']);
    expect(c.violations[0]?.message).toMatch(/stop the VM, then tick “The VM is stopped”/);
    expect(c.violations[0]?.message).toMatch(/keep 4 cores or more and keep 8 GB of RAM or more/);
    expect(c.needsStoppedConfirmation).toBe(true);
    expect(c.cooldownOnly).toBe(false);
  });

  it('passes with the confirmation', () => {
    const c = check({ cores: 2 }, { confirmedStopped: true });
    expect(c.violations).toEqual([]);
    expect(c.needsStoppedConfirmation).toBe(true);
    expect(c.decreases).toEqual(['cores']);
  });

  it('does not ask for a stopped VM to lower the CPU class alone', () => {
    const c = check({ cpuClass: 'light' });
    expect(c.violations).toEqual([]);
    expect(c.needsStoppedConfirmation).toBe(false);
  });
});

describe('checkResize: OS disk', () => {
  it('refuses a smaller disk and names the minimum allowed', () => {
    const c = check({ osDiskGb: 40 });
    expect(codes(c)).toEqual(['osDiskGb:disk_shrink']);
    expect(c.violations[0]?.message).toContain('minimum allowed is 50 GB');
    expect(c.steps).toEqual([]);
  });
});

describe('checkResize: WAN mode', () => {
  it('refuses a direct switch between attached modes and offers the two-step plan', () => {
    const c = check({ wanMode: 'ipv6' });
    expect(codes(c)).toEqual(['wanMode:wan_direct']);
    expect(c.violations[0]?.message).toMatch(/from ipv4 to ipv6/);
    expect(c.violations[0]?.message).toMatch(/two steps \(off, then ipv6/);
  });

  it('plans two steps when accepted: the other changes with off first, then only the target mode', () => {
    const c = check({ cores: 8, wanMode: 'dual', privateNetwork: 'on' }, { acceptWanTwoStep: true });
    expect(c.violations).toEqual([]);
    expect(c.wanTwoStep).toBe(true);
    expect(c.steps).toEqual([{ cores: 8, privateNetwork: 'on', wanMode: 'off' }, { wanMode: 'dual' }]);
    expect(c.notes.join('\n')).toMatch(/two steps: off first, then dual/);
  });

  it('switches to and from off in one step', () => {
    expect(check({ wanMode: 'off' }).steps).toEqual([{ wanMode: 'off' }]);
    const fromOff = check({ wanMode: 'ipv6' }, { vm: { ...VM, wanMode: 'off' }, acceptWanTwoStep: true });
    expect(fromOff.steps).toEqual([{ wanMode: 'ipv6' }]);
    expect(fromOff.wanTwoStep).toBe(false);
  });

  it('lets the API judge when the current mode is unknown, unless two steps were accepted', () => {
    const vm = { ...VM, wanMode: undefined };
    const single = check({ wanMode: 'ipv6' }, { vm });
    expect(single.violations).toEqual([]);
    expect(single.steps).toEqual([{ wanMode: 'ipv6' }]);
    expect(single.unknown).toEqual(['wanMode']);
    expect(single.notes.join('\n')).toMatch(/not known to the bot.*API refuses a direct switch/);
    const twoStep = check({ wanMode: 'ipv6' }, { vm, acceptWanTwoStep: true });
    expect(twoStep.steps).toEqual([{ wanMode: 'off' }, { wanMode: 'ipv6' }]);
  });
});

describe('checkResize: bounds, configuration and nothing to do', () => {
  it('refuses numbers outside 1..limit with the limit named', () => {
    const c = check({ cores: 65, ramGb: 0 }, { confirmedStopped: true });
    expect(codes(c)).toEqual(['cores:bounds', 'ramGb:bounds']);
    expect(c.violations[0]?.message).toMatch(/from 1 to 64/);
    const fractional = check({ cores: 2.5 });
    expect(codes(fractional)).toEqual(['cores:not_integer']);
  });

  it('refuses a CPU class or private network the policy does not configure', () => {
    const c = check(
      { cpuClass: 'light', privateNetwork: 'on' },
      { configured: { cpuClass: false, privateNetwork: false } },
    );
    expect(codes(c)).toEqual(['cpuClass:not_configured', 'privateNetwork:not_configured']);
    expect(c.violations[0]?.message).toMatch(/resize_fields.cpu_class/);
  });

  it('says nothing would change when every value matches what is known', () => {
    const c = check({ cores: 4, ramGb: 8, wanMode: 'ipv4' });
    expect(codes(c)).toEqual(['cores:no_change']);
    expect(c.violations[0]?.message).toMatch(
      /cores is already 4, RAM is already 8 GB, the WAN mode is already ipv4/,
    );
    expect(c.steps).toEqual([]);
    expect(codes(check({}))).toEqual(['cores:no_change']);
  });

  it('refuses values outside each field’s vocabulary', () => {
    const c = check({ wanMode: 'ipv5' as never, cpuClass: 'turbo' as never });
    expect(codes(c)).toEqual(['cpuClass:bad_value', 'wanMode:bad_value']);
  });
});

describe('checkResize: unknown current values', () => {
  it('sends them and says the API judges them; cores or RAM it cannot tell may be lowered, so the VM must be stopped', () => {
    const vm: VmKnown = { vmid: 102, ha: false };
    const unconfirmed = check({ cores: 2, ramGb: 4, osDiskGb: 20 }, { vm });
    expect(codes(unconfirmed)).toEqual(['confirmStopped:needs_stopped']);
    expect(unconfirmed.violations[0]?.message).toBe(
      "The bot does not know this VM's current cores or RAM, so 2 and 4 GB may lower them, and lowering cores or RAM needs the VM stopped: stop the VM, then tick “The VM is stopped” (or add the VM's size to the policy file).",
    );
    expect(check({ osDiskGb: 20 }, { vm }).violations).toEqual([]);
    const c = check({ cores: 2, ramGb: 4, osDiskGb: 20 }, { vm, confirmedStopped: true });
    expect(c.violations).toEqual([]);
    expect(c.needsStoppedConfirmation).toBe(true);
    expect(c.unknown).toEqual(['cores', 'ramGb', 'osDiskGb']);
    expect(c.directions).toEqual({ cores: 'unknown', ramGb: 'unknown', osDiskGb: 'unknown' });
    expect(c.steps).toEqual([{ cores: 2, ramGb: 4, osDiskGb: 20 }]);
    expect(c.notes.filter((n) => /not known to the bot.*the API judges it/.test(n))).toHaveLength(3);
  });
});

describe('helpers', () => {
  it('formatUtc rounds up to the minute so the time shown is allowed', () => {
    expect(formatUtc(new Date('2025-03-11T09:00:00Z'))).toBe('2025-03-11 09:00 UTC');
    expect(formatUtc(new Date('2025-03-11T09:00:00.001Z'))).toBe('2025-03-11 09:01 UTC');
  });
});
