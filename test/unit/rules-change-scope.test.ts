import { describe, expect, it } from 'vitest';
import { approvalKind, classifyChange, scopeRefusal } from '../../src/rules/change-scope.ts';

const known = {
  cores: 4,
  ramGb: 8,
  osDiskGb: 100,
  cpuClass: 'regular',
  wanMode: 'ipv4',
  privateNetwork: 'off',
} as const;

describe('classifyChange', () => {
  it('classes each field: raise, lower, both, unknown; fields asked at their value are left out', () => {
    const scope = classifyChange(known, {
      cores: 3,
      ramGb: 64,
      osDiskGb: 100,
      cpuClass: 'light',
      wanMode: 'ipv6',
      privateNetwork: 'on',
    });
    expect(scope.fields).toEqual({
      cores: 'lower',
      ramGb: 'raise',
      cpuClass: 'lower',
      wanMode: 'both',
      privateNetwork: 'raise',
    });
    expect(scope.direction).toBe('mixed');
    expect(approvalKind(scope)).toBe('resize_down');
  });

  it('WAN: off lowers, dual raises over ipv4, ipv4 over ipv6 does both', () => {
    expect(classifyChange(known, { wanMode: 'off' }).fields.wanMode).toBe('lower');
    expect(classifyChange(known, { wanMode: 'dual' }).fields.wanMode).toBe('raise');
    expect(classifyChange({ wanMode: 'dual' }, { wanMode: 'ipv6' }).fields.wanMode).toBe('lower');
    expect(classifyChange({ wanMode: 'off' }, { wanMode: 'ipv6' }).direction).toBe('resize_up');
  });

  it('a field whose value is not known is unknown, and so is the change: neither an increase nor a decrease', () => {
    const scope = classifyChange({}, { cores: 1 });
    expect(scope).toMatchObject({ fields: { cores: 'unknown' }, direction: 'unknown' });
    expect(approvalKind(scope)).toBe('resize_down');
    expect(approvalKind(classifyChange(known, { cores: 8 }))).toBe('resize_up');
  });
});

describe('scopeRefusal', () => {
  const who = 'Agent a';
  it('a decrease-only asker may not raise any field, even beside a decrease', () => {
    expect(scopeRefusal(classifyChange(known, { cores: 3, ramGb: 64 }), ['resize_down'], who)).toBe(
      'Agent a may not ask for increases (resize_up), and this change raises RAM (8 GB → 64 GB).',
    );
    expect(scopeRefusal(classifyChange(known, { cores: 3 }), ['resize_down'], who)).toBeUndefined();
  });

  it('an increase-only asker may not lower, switch between networks, or change what the bot does not know', () => {
    expect(scopeRefusal(classifyChange(known, { wanMode: 'off' }), ['resize_up'], who)).toBe(
      'Agent a may not ask for decreases (resize_down), and this change lowers the WAN mode (ipv4 → off).',
    );
    expect(scopeRefusal(classifyChange(known, { wanMode: 'ipv6' }), ['resize_up'], who)).toContain(
      'lowers the WAN mode (ipv4 → ipv6)',
    );
    expect(scopeRefusal(classifyChange({}, { cores: 1, ramGb: 2 }), ['resize_up'], who)).toBe(
      "Agent a may ask only for increases (resize_up), and the bot does not know the VM's current cores, RAM, so whether 1, 2 GB raises or lowers them is unknown.",
    );
    expect(
      scopeRefusal(classifyChange(known, { cores: 8, wanMode: 'dual' }), ['resize_up'], who),
    ).toBeUndefined();
  });

  it('an asker allowed both ways may ask anything, unknown included; one allowed neither is refused', () => {
    expect(scopeRefusal(classifyChange({}, { cores: 1 }), ['resize_up', 'resize_down'], who)).toBeUndefined();
    expect(scopeRefusal(classifyChange(known, { cores: 8 }), ['restore'], who)).toContain(
      'may not ask for increases (resize_up)',
    );
  });
});
