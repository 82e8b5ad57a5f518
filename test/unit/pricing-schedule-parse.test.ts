import { describe, expect, it } from 'vitest';
import { nextRun, parseDigestCommand } from '../../src/pricing/schedule-parse.ts';

const subscribe = (args: string[], minIntervalMs?: number) => {
  const parsed = parseDigestCommand(args, { minIntervalMs });
  if (parsed.action !== 'subscribe') throw new Error(`expected a schedule, got ${JSON.stringify(parsed)}`);
  return parsed.schedule;
};
const error = (args: string[]) => {
  const parsed = parseDigestCommand(args);
  if (parsed.action !== 'error') throw new Error(`expected an error, got ${JSON.stringify(parsed)}`);
  return parsed.message;
};

describe('digest schedule parsing', () => {
  it('daily HH:MM defaults to UTC and runs at that time', () => {
    const s = subscribe(['daily', '09:30']);
    expect(s).toMatchObject({ pattern: '30 9 * * *', tz: 'UTC', label: 'daily at 09:30 (UTC)' });
    expect(nextRun(s, new Date('2026-03-01T10:00:00Z')).toISOString()).toBe('2026-03-02T09:30:00.000Z');
  });

  it('daily with an IANA zone runs at local time, canonical name kept', () => {
    const s = subscribe(['daily', '9:00', 'europe/paris']);
    expect(s.tz).toBe('Europe/Paris');
    // Paris is UTC+1 in January.
    expect(nextRun(s, new Date('2026-01-10T00:00:00Z')).toISOString()).toBe('2026-01-10T08:00:00.000Z');
  });

  it('weekly takes weekday names', () => {
    const s = subscribe(['weekly', 'Mon', '08:05', 'UTC']);
    expect(s.pattern).toBe('5 8 * * 1');
    expect(s.label).toBe('every Monday at 08:05 (UTC)');
    expect(subscribe(['weekly', 'sunday', '23:59']).pattern).toBe('59 23 * * 0');
    expect(nextRun(s, new Date('2026-01-01T00:00:00Z')).toISOString()).toBe('2026-01-05T08:05:00.000Z');
  });

  it('cron takes 5 or 6 fields, with a time zone', () => {
    expect(subscribe(['cron', '0 9 * * 1-5', 'America/New_York'])).toMatchObject({
      pattern: '0 9 * * 1-5',
      tz: 'America/New_York',
    });
    expect(subscribe(['cron', '*/1 * * * * *'], 500).pattern).toBe('*/1 * * * * *');
  });

  it('off, list and now take no more words', () => {
    expect(parseDigestCommand(['off'])).toEqual({ action: 'off' });
    expect(parseDigestCommand(['LIST'])).toEqual({ action: 'list' });
    expect(parseDigestCommand(['now'])).toEqual({ action: 'now' });
    expect(error(['now', 'please'])).toContain('takes no more words');
  });

  it('refuses times out of range with a clear reason', () => {
    expect(error(['daily', '24:00'])).toContain('hours go 00–23');
    expect(error(['daily', '12:60'])).toContain('minutes 00–59');
    expect(error(['daily', 'noon'])).toContain('HH:MM');
  });

  it('refuses unknown weekdays and time zones', () => {
    expect(error(['weekly', 'funday', '09:00'])).toContain('is not a weekday');
    expect(error(['daily', '09:00', 'Mars/Olympus'])).toContain('unknown time zone `Mars/Olympus`');
    expect(error(['cron', '0 9 * * *', 'Nowhere/City'])).toContain('unknown time zone');
  });

  it('refuses bad cron expressions', () => {
    expect(error(['cron', '61 * * * *'])).toContain('is not a cron expression');
    expect(error(['cron', 'every day'])).toContain('5 fields');
    expect(error(['cron', 'a b c d e'])).toContain('is not a cron expression');
  });

  it('refuses schedules more frequent than the minimum interval', () => {
    expect(error(['cron', '* * * * *'])).toContain('more often than once every 60 minutes');
    expect(subscribe(['cron', '0 * * * *']).pattern).toBe('0 * * * *');
  });

  it('names the usage on a missing or unknown option', () => {
    expect(error([])).toContain('/cloud digest daily');
    expect(error(['monthly'])).toContain('unknown digest option `monthly`');
  });
});
