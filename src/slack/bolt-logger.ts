import { type Logger as BoltLogger, LogLevel } from '@slack/bolt';
import type { Logger } from '../observability/logger.ts';

/** Bolt's logger interface over our pino logger, so Bolt's lines are JSON and redacted like ours. */
export function boltLogger(logger: Logger): BoltLogger {
  const child = logger.child({ component: 'bolt' });
  let level: LogLevel = LogLevel.WARN;
  const text = (msg: unknown[]) =>
    msg
      .map((m) => (typeof m === 'string' ? m : m instanceof Error ? m.message : JSON.stringify(m)))
      .join(' ');
  // Bolt and the Web API client log debug lines per request; join them only when that level is on.
  return {
    debug: (...msg: unknown[]) => {
      if (child.isLevelEnabled('debug')) child.debug(text(msg));
    },
    info: (...msg: unknown[]) => {
      if (child.isLevelEnabled('info')) child.info(text(msg));
    },
    warn: (...msg: unknown[]) => child.warn(text(msg)),
    error: (...msg: unknown[]) => child.error(text(msg)),
    setLevel: (next: LogLevel) => {
      level = next;
    },
    getLevel: () => level,
    setName: () => undefined,
  };
}
