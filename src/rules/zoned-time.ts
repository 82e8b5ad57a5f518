/**
 * Wall-clock times in IANA time zones, without a date library: what a freeze window's "15:00 Europe/Berlin" is as
 * an instant, across daylight-saving changes. Pure; the runtime's time zone database is the only input.
 */

const DAY_MS = 86_400_000;
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(tz: string): Intl.DateTimeFormat {
  let found = formatters.get(tz);
  if (!found) {
    found = new Intl.DateTimeFormat('en-US', {
      timeZone: tz,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(tz, found);
  }
  return found;
}

/** True when the runtime knows `tz` (an IANA name such as Europe/Berlin, or UTC). */
export function isTimeZone(tz: string): boolean {
  try {
    formatter(tz);
    return true;
  } catch {
    return false;
  }
}

/** A wall-clock time: the calendar date and the time of day, with no zone. */
export interface WallTime {
  year: number;
  /** 1-12 */
  month: number;
  day: number;
  hour: number;
  minute: number;
}

/** The wall time as if it were UTC, in ms: the arithmetic form of a wall time. */
function wallMs(wall: WallTime): number {
  return Date.UTC(wall.year, wall.month - 1, wall.day, wall.hour, wall.minute);
}

/** The wall time in `tz` at `instantMs`, as UTC-ms arithmetic form (seconds dropped). */
function wallAt(instantMs: number, tz: string): number {
  const parts: Record<string, number> = {};
  for (const part of formatter(tz).formatToParts(new Date(instantMs))) {
    if (part.type !== 'literal') parts[part.type] = Number(part.value);
  }
  return Date.UTC(
    parts.year ?? 1970,
    (parts.month ?? 1) - 1,
    parts.day ?? 1,
    parts.hour ?? 0,
    parts.minute ?? 0,
  );
}

/** The zone's offset from UTC at `instantMs`, in ms, to the minute. */
function offsetAt(instantMs: number, tz: string): number {
  const minute = Math.floor(instantMs / 60_000) * 60_000;
  return wallAt(minute, tz) - minute;
}

/**
 * The instant a wall time in `tz` stands for. A time that happens twice (clocks going back) is its first
 * occurrence; a time that never happens (clocks going forward) is moved on by the gap, so "02:30" on the night of
 * the change is 03:30, as calendars do it.
 */
export function zonedToUtc(wall: WallTime, tz: string): Date {
  const local = wallMs(wall);
  const before = offsetAt(local - DAY_MS, tz);
  const after = offsetAt(local + DAY_MS, tz);
  const candidates = [local - before, local - after].filter((t) => wallAt(t, tz) === local);
  if (candidates.length > 0) return new Date(Math.min(...candidates));
  return new Date(local - before);
}

/** The wall time in `tz` at `date`, with its weekday (0 = Sunday). */
export function wallTimeIn(date: Date, tz: string): WallTime & { weekday: number } {
  const ms = wallAt(date.getTime(), tz);
  const wall = new Date(ms);
  return {
    year: wall.getUTCFullYear(),
    month: wall.getUTCMonth() + 1,
    day: wall.getUTCDate(),
    hour: wall.getUTCHours(),
    minute: wall.getUTCMinutes(),
    weekday: wall.getUTCDay(),
  };
}

/** The calendar date `days` after `wall`'s date, at `hour:minute`. */
export function dayAfter(wall: WallTime, days: number, hour: number, minute: number): WallTime {
  const date = new Date(Date.UTC(wall.year, wall.month - 1, wall.day + days));
  return {
    year: date.getUTCFullYear(),
    month: date.getUTCMonth() + 1,
    day: date.getUTCDate(),
    hour,
    minute,
  };
}

/** The weekday of a calendar date (0 = Sunday). */
export function weekdayOf(wall: WallTime): number {
  return new Date(Date.UTC(wall.year, wall.month - 1, wall.day)).getUTCDay();
}

/** "2026-12-20T00:00" (seconds allowed, no zone) as a wall time; undefined when it is not one. */
export function parseWallTime(text: string): WallTime | undefined {
  const match = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::00)?$/.exec(text);
  if (!match) return undefined;
  const [year, month, day, hour, minute] = match.slice(1).map(Number) as [
    number,
    number,
    number,
    number,
    number,
  ];
  const check = new Date(Date.UTC(year, month - 1, day, hour, minute));
  if (check.getUTCMonth() !== month - 1 || check.getUTCDate() !== day || hour > 23 || minute > 59)
    return undefined;
  return { year, month, day, hour, minute };
}

/** "15:00" as minutes after midnight; "24:00" is the end of the day. Undefined when it is not a time. */
export function parseClock(text: string): number | undefined {
  const match = /^(\d{2}):(\d{2})$/.exec(text);
  if (!match) return undefined;
  const hour = Number(match[1]);
  const minute = Number(match[2]);
  if (minute > 59 || hour > 24 || (hour === 24 && minute > 0)) return undefined;
  return hour * 60 + minute;
}
