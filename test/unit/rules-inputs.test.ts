import { describe, expect, it } from 'vitest';
import {
  checkBackupSlug,
  isBackupSlug,
  isUuid,
  isViolation,
  parseCpuClass,
  parseOnOff,
  parseProjectUuid,
  parseVmid,
  parseWanMode,
  parseWholeNumber,
} from '../../src/rules/inputs.ts';

describe('parseVmid', () => {
  it.each([
    ['101', 101],
    [' 7 ', 7],
    ['0101', 101],
  ])('reads %j as %d', (raw, expected) => {
    expect(parseVmid(raw)).toBe(expected);
  });

  it.each(['', '0', '-1', '1.5', '1e3', 'abc', '101;rm', '99999999999999999999', '１０１', '1234567890123'])(
    'refuses %j with a bad_vmid on the vmid field',
    (raw) => {
      const result = parseVmid(raw);
      expect(isViolation(result)).toBe(true);
      expect(result).toMatchObject({ field: 'vmid', code: 'bad_vmid' });
      expect(isViolation(result) && result.message).toMatch(/whole number above 0/);
    },
  );
});

describe('parseWholeNumber', () => {
  it('reads whole numbers within 1..limit', () => {
    expect(parseWholeNumber('4', 'cores', 64)).toBe(4);
    expect(parseWholeNumber(' 64 ', 'cores', 64)).toBe(64);
    expect(parseWholeNumber('1', 'ramGb', 512)).toBe(1);
  });

  it('refuses what is not a whole number, naming the field, the value and what is allowed', () => {
    expect(parseWholeNumber('4.5', 'cores', 64)).toEqual({
      field: 'cores',
      code: 'not_integer',
      message: 'Cores takes a whole number from 1 to 64, not "4.5".',
    });
    expect(parseWholeNumber('eight', 'ramGb', 512)).toMatchObject({ field: 'ramGb', code: 'not_integer' });
    expect(parseWholeNumber('', 'osDiskGb', 10)).toMatchObject({ code: 'not_integer' });
  });

  it('refuses numbers outside 1..limit with the limit named', () => {
    expect(parseWholeNumber('65', 'cores', 64)).toEqual({
      field: 'cores',
      code: 'bounds',
      message: "Cores must be from 1 to 64 (the policy's limit), not 65.",
    });
    expect(parseWholeNumber('0', 'ramGb', 512)).toMatchObject({ code: 'bounds' });
    expect(parseWholeNumber('-4', 'ramGb', 512)).toMatchObject({ code: 'bounds' });
    expect(parseWholeNumber('123456789012345678901234567890', 'osDiskGb', 4096)).toMatchObject({
      code: 'bounds',
    });
  });

  it('never echoes more than a short piece of a long paste', () => {
    const result = parseWholeNumber('x'.repeat(5000), 'cores', 64);
    expect(isViolation(result) && result.message.length).toBeLessThan(120);
  });
});

describe('project UUID', () => {
  it('accepts the 8-4-4-4-12 form in any case and lower-cases it', () => {
    expect(isUuid('0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10')).toBe(true);
    expect(parseProjectUuid(' 0B6F7C1E-3D2A-4C55-9A53-2F1A4E8B9C10 ')).toBe(
      '0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10',
    );
  });

  it.each([
    '',
    'shop-prod',
    '0b6f7c1e3d2a4c559a532f1a4e8b9c10',
    '0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c1g',
    '../x',
  ])('refuses %j', (raw) => {
    expect(parseProjectUuid(raw)).toMatchObject({ field: 'project', code: 'bad_uuid' });
  });
});

describe('backup slug', () => {
  it.each(['daily-2025-03-01', 'vzdump_qemu.101', 'A', 'a..b', '.hidden', 'x'.repeat(128)])(
    'accepts %j',
    (slug) => {
      expect(isBackupSlug(slug)).toBe(true);
      expect(checkBackupSlug(slug)).toBeUndefined();
    },
  );

  it.each(['', '.', '..', 'a/b', '../etc', 'a b', 'snap%2F', 'ä', 'a?x=1', 'x'.repeat(129)])(
    'refuses %j',
    (slug) => {
      expect(isBackupSlug(slug)).toBe(false);
      const violation = checkBackupSlug(slug);
      expect(violation).toMatchObject({ field: 'backupSlug', code: 'bad_slug' });
      expect(violation?.message).toMatch(/only letters, digits, "\.", "_" and "-"/);
    },
  );
});

describe('choices', () => {
  it('reads WAN mode, CPU class and on/off in any case, and refuses other words with the allowed list', () => {
    expect(parseWanMode('DUAL')).toBe('dual');
    expect(parseCpuClass('Light')).toBe('light');
    expect(parseOnOff('on')).toBe('on');
    expect(parseWanMode('ipv5')).toMatchObject({
      field: 'wanMode',
      code: 'bad_value',
      message: 'WAN mode is one of off, ipv4, ipv6, dual, not "ipv5".',
    });
    expect(parseCpuClass('fast')).toMatchObject({ field: 'cpuClass', code: 'bad_value' });
    expect(parseOnOff('yes')).toMatchObject({ field: 'privateNetwork', code: 'bad_value' });
  });
});
