import { CronExpressionParser } from 'cron-parser';

/** When a channel's digest runs: a cron pattern (5 or 6 fields) read in an IANA time zone. */
export interface DigestSchedule {
  pattern: string;
  tz: string;
  /** How people read it, e.g. "daily at 09:00 (Europe/Paris)". */
  label: string;
}

/** What `/cloud digest …` asks for, before anything touches Redis. */
export type DigestCommand =
  | { action: 'subscribe'; schedule: DigestSchedule }
  | { action: 'off' }
  | { action: 'list' }
  | { action: 'now' }
  | { action: 'error'; message: string };

/** Usage line for help and error messages. */
export const DIGEST_USAGE =
  '`/cloud digest daily HH:MM [TZ]` | `weekly <mon..sun> HH:MM [TZ]` | `cron "<expr>" [TZ]` | `off` | `list` | `now`';

/** Digests more often than this flood a channel; tests pass a smaller value. */
export const DIGEST_MIN_INTERVAL_MS = 60 * 60_000;

const WEEKDAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'] as const;
const WEEKDAY_NAMES = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'] as const;

export interface ParseOptions {
  /** The shortest gap allowed between two digests. */
  minIntervalMs?: number;
}

/** The canonical IANA name of `tz`, or undefined when the runtime does not know it. */
export function canonicalTimeZone(tz: string): string | undefined {
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: tz }).resolvedOptions().timeZone;
  } catch {
    return undefined;
  }
}

/** The next run of `schedule` strictly after `after`. */
export function nextRun(schedule: Pick<DigestSchedule, 'pattern' | 'tz'>, after: Date): Date {
  return CronExpressionParser.parse(schedule.pattern, { tz: schedule.tz, currentDate: after })
    .next()
    .toDate();
}

const fail = (message: string): DigestCommand => ({ action: 'error', message });

function parseTime(text: string | undefined): { hour: number; minute: number } | string {
  const match = /^(\d{1,2}):(\d{2})$/.exec(text ?? '');
  if (!match) return `give the time as HH:MM (24-hour), not \`${text ?? ''}\``;
  const hour = Number(match[1]);
  const minute = Number(match[2]);
  if (hour > 23 || minute > 59) return `\`${text}\` is not a time of day: hours go 00–23 and minutes 00–59`;
  return { hour, minute };
}

function parseZone(text: string | undefined): string | { error: string } {
  if (text === undefined) return 'UTC';
  const tz = canonicalTimeZone(text);
  if (!tz)
    return { error: `unknown time zone \`${text}\`: use an IANA name such as \`Europe/Paris\` or \`UTC\`` };
  return tz;
}

const pad = (n: number) => String(n).padStart(2, '0');

/** Checks that a pattern parses and does not fire more often than `minIntervalMs`. */
function checkPattern(pattern: string, tz: string, minIntervalMs: number): string | undefined {
  let expression: ReturnType<typeof CronExpressionParser.parse>;
  try {
    expression = CronExpressionParser.parse(pattern, { tz, currentDate: new Date(Date.UTC(2030, 0, 1)) });
  } catch (error) {
    return `\`${pattern}\` is not a cron expression this bot can read (${(error as Error).message})`;
  }
  // Look at a handful of consecutive runs: enough to catch "every minute/second" style patterns.
  let previous = expression.next().toDate().getTime();
  for (let i = 0; i < 6; i += 1) {
    if (!expression.hasNext()) break;
    const next = expression.next().toDate().getTime();
    if (next - previous < minIntervalMs) {
      return `\`${pattern}\` runs more often than once every ${Math.round(minIntervalMs / 60_000)} minutes; pick a calmer schedule`;
    }
    previous = next;
  }
  return undefined;
}

/** Parses the words after `digest`. Never throws; a mistake comes back as `{ action: 'error' }`. */
export function parseDigestCommand(args: string[], options: ParseOptions = {}): DigestCommand {
  const minIntervalMs = options.minIntervalMs ?? DIGEST_MIN_INTERVAL_MS;
  const [first, ...rest] = args;
  const word = (first ?? '').toLowerCase();
  const noArgs = (action: 'off' | 'list' | 'now'): DigestCommand =>
    rest.length === 0 ? { action } : fail(`\`digest ${action}\` takes no more words. Usage: ${DIGEST_USAGE}`);
  const build = (
    pattern: string,
    tzText: string | undefined,
    label: (tz: string) => string,
  ): DigestCommand => {
    const tz = parseZone(tzText);
    if (typeof tz !== 'string') return fail(tz.error);
    const problem = checkPattern(pattern, tz, minIntervalMs);
    if (problem) return fail(problem);
    return { action: 'subscribe', schedule: { pattern, tz, label: `${label(tz)} (${tz})` } };
  };
  switch (word) {
    case 'off':
    case 'list':
    case 'now':
      return noArgs(word);
    case 'daily': {
      if (rest.length < 1 || rest.length > 2) return fail(`Usage: \`/cloud digest daily HH:MM [TZ]\``);
      const time = parseTime(rest[0]);
      if (typeof time === 'string') return fail(time);
      return build(
        `${time.minute} ${time.hour} * * *`,
        rest[1],
        () => `daily at ${pad(time.hour)}:${pad(time.minute)}`,
      );
    }
    case 'weekly': {
      if (rest.length < 2 || rest.length > 3)
        return fail(`Usage: \`/cloud digest weekly <mon..sun> HH:MM [TZ]\``);
      const dayText = (rest[0] ?? '').toLowerCase();
      const day = WEEKDAYS.findIndex(
        (d) =>
          dayText.length >= 3 && (WEEKDAY_NAMES[WEEKDAYS.indexOf(d)] ?? '').toLowerCase().startsWith(dayText),
      );
      if (day < 0) return fail(`\`${rest[0]}\` is not a weekday: use mon, tue, wed, thu, fri, sat or sun`);
      const time = parseTime(rest[1]);
      if (typeof time === 'string') return fail(time);
      return build(
        `${time.minute} ${time.hour} * * ${day}`,
        rest[2],
        () => `every ${WEEKDAY_NAMES[day]} at ${pad(time.hour)}:${pad(time.minute)}`,
      );
    }
    case 'cron': {
      if (rest.length < 1 || rest.length > 2) {
        return fail(
          'Usage: `/cloud digest cron "<expr>" [TZ]` with the expression in quotes, e.g. `cron "0 9 * * 1-5" Europe/Paris`',
        );
      }
      const pattern = (rest[0] ?? '').trim().replace(/\s+/g, ' ');
      const fields = pattern.split(' ').length;
      if (fields < 5 || fields > 6) {
        return fail(
          `a cron expression has 5 fields (or 6 with seconds first), \`${pattern}\` has ${fields}; put it in quotes`,
        );
      }
      return build(pattern, rest[1], () => `cron \`${pattern}\``);
    }
    case '':
      return fail(`say when. Usage: ${DIGEST_USAGE}`);
    default:
      return fail(`unknown digest option \`${first}\`. Usage: ${DIGEST_USAGE}`);
  }
}
