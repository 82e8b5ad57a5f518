/** One check of `cloudops doctor`: what was looked at, what was found, and for a problem what to do. */
export interface CheckResult {
  /** Stable identifier for scripts (`--json`), e.g. `redis.maxmemory-policy`. */
  id: string;
  status: 'ok' | 'warn' | 'fail';
  /** One sentence: what was found. */
  summary: string;
  /** What to do about it (warnings and failures). */
  fix?: string;
  /**
   * How the check's calls left this machine when a proxy is configured: `proxy http://proxy.example.com:3128`
   * (credentials removed) or `direct (NO_PROXY)`; absent when no proxy is set.
   */
  via?: string;
}

/** A passing check. */
export const ok = (id: string, summary: string): CheckResult => ({ id, status: 'ok', summary });
/** Works, but something is missing or degraded. */
export const warn = (id: string, summary: string, fix?: string): CheckResult => ({
  id,
  status: 'warn',
  summary,
  fix,
});
/** Will not work until fixed. */
export const fail = (id: string, summary: string, fix: string): CheckResult => ({
  id,
  status: 'fail',
  summary,
  fix,
});

const MARKS: Record<CheckResult['status'], string> = { ok: '✓', warn: '!', fail: '✗' };

/** The line a person reads: `✗ summary → what to do`. */
export function formatCheck(check: CheckResult): string {
  const fix = check.fix && check.status !== 'ok' ? ` → ${check.fix}` : '';
  const via = check.via ? ` [${check.via}]` : '';
  return `${MARKS[check.status]} ${check.summary}${via}${fix}`;
}
