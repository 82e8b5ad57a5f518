import { describe, expect, it } from 'vitest';
import { parsePolicy } from '../../src/config/policy.ts';
import { resizeBody, UnmappedFieldError } from '../../src/jobs/resize-body.ts';
import { FAST_RETRY, retryDelayMs } from '../../src/jobs/retry-policy.ts';
import { isIncrease } from '../../src/rules/resize.ts';

const mapped = parsePolicy(
  'resize_fields:\n  cpu_class: { field: cpu_type, values: [std, eco] }\n  private_network: { field: vlan, values: ["0", "1"] }\n',
).resize_fields;
const unmapped = parsePolicy('{}').resize_fields;

describe('resizeBody', () => {
  it('sends the documented fields by their wire names', () => {
    expect(resizeBody({ cores: 4, ramGb: 8, osDiskGb: 60, wanMode: 'off' }, unmapped)).toEqual({
      cores: 4,
      ram_gb: 8,
      os_disk_gb: 60,
      wan_mode: 'off',
    });
  });

  it('sends CPU class and private network only through the configured field name and values', () => {
    expect(resizeBody({ cpuClass: 'light', privateNetwork: 'on' }, mapped)).toEqual({
      cpu_type: 'eco',
      vlan: '1',
    });
    expect(resizeBody({ cpuClass: 'regular', privateNetwork: 'off' }, mapped)).toEqual({
      cpu_type: 'std',
      vlan: '0',
    });
  });

  it('refuses a CPU class or private network the policy does not map', () => {
    expect(() => resizeBody({ cpuClass: 'light' }, unmapped)).toThrow(UnmappedFieldError);
    expect(() => resizeBody({ privateNetwork: 'on' }, unmapped)).toThrow(UnmappedFieldError);
  });
});

describe('isIncrease', () => {
  it('counts more cores, more RAM or light → regular as an increase', () => {
    expect(isIncrease({ cores: 4 }, { cores: 2 })).toBe(true);
    expect(isIncrease({ ramGb: 8 }, { ramGb: 4 })).toBe(true);
    expect(isIncrease({ cpuClass: 'regular' }, { cpuClass: 'light' })).toBe(true);
  });

  it('does not count decreases, disk or WAN changes', () => {
    expect(isIncrease({ cores: 2, ramGb: 4 }, { cores: 4, ramGb: 8 })).toBe(false);
    expect(isIncrease({ osDiskGb: 100, wanMode: 'dual' }, { cores: 2 })).toBe(false);
    expect(isIncrease({ cpuClass: 'light' }, { cpuClass: 'regular' })).toBe(false);
  });

  it('counts a change from an unknown size as an increase, the side the 24-hour rule enforces', () => {
    expect(isIncrease({ cores: 2 }, {})).toBe(true);
  });
});

describe('retryDelayMs', () => {
  it("honours the server's Retry-After, bounded", () => {
    expect(retryDelayMs(FAST_RETRY, 1, { retryAfterMs: 1200 })).toBe(1200);
    expect(retryDelayMs(FAST_RETRY, 1, { retryAfterMs: 10 ** 9 })).toBe(FAST_RETRY.maxRetryAfterMs);
  });

  it('grows exponentially with jitter up to the maximum', () => {
    const first = retryDelayMs(FAST_RETRY, 1, new Error('x'));
    expect(first).toBeGreaterThanOrEqual(FAST_RETRY.baseMs * 0.8);
    expect(first).toBeLessThanOrEqual(FAST_RETRY.baseMs * 1.2);
    const late = retryDelayMs(FAST_RETRY, 20);
    expect(late).toBeLessThanOrEqual(FAST_RETRY.maxMs * 1.2);
    expect(late).toBeGreaterThanOrEqual(FAST_RETRY.maxMs * 0.8);
  });
});
