/**
 * Reading the policy again without a restart (docs/policy.md#reload): on SIGHUP (main.ts) and, with POLICY_WATCH=1,
 * when the file changes. A valid file replaces the policy and is audited once across the deployment
 * (`policy_changed`, old → new version and what changed); an invalid one keeps the old policy and logs one line.
 */
import { type FSWatcher, watch } from 'node:fs';
import { basename, dirname } from 'node:path';
import type { FilePolicySource, ReloadOutcome } from '../config/policy-source.ts';
import type { RedisClient } from '../config/redis-connection.ts';
import type { Logger } from '../observability/logger.ts';
import { AuditAppender, type AuditContext, chainKeys } from '../requests/audit/append.ts';
import { standaloneEntry } from '../requests/audit/entry.ts';

/** How long a burst of file events (an editor's save, a ConfigMap's symlink swap) settles before one reload. */
export const WATCH_SETTLE_MS = 200;

/** What a reload reads and writes. */
export interface ReloadParts {
  source: FilePolicySource;
  redis: RedisClient;
  prefix: string;
  audit: AuditContext;
  logger: Logger;
  now: () => Date;
}

/** Reloads the policy once and says what happened: a log line, and for a change its audit entry. */
export function policyReloader(parts: ReloadParts): (why: string) => Promise<ReloadOutcome> {
  const { source, logger } = parts;
  const appender = new AuditAppender(parts.redis, parts.prefix, parts.audit, parts.now);
  return async (why) => {
    const outcome = await source.reload();
    if (outcome.kind === 'invalid') {
      logger.error(
        { why, version: outcome.version },
        `policy not reloaded, keeping version ${outcome.version}: ${outcome.problem}`,
      );
      return outcome;
    }
    if (outcome.kind === 'unchanged') {
      logger.info({ why, version: outcome.version }, 'policy reloaded: unchanged');
      return outcome;
    }
    const details = `policy ${outcome.from} → ${outcome.to}: ${outcome.changes}`;
    logger.info({ why, from: outcome.from, to: outcome.to }, `policy reloaded: ${details}`);
    try {
      await appender.append(
        [
          standaloneEntry(
            { act: 'policy_changed', actor: 'cloudops', details },
            parts.now().toISOString(),
            outcome.to,
          ),
        ],
        { key: chainKeys(parts.prefix).policyVersion, value: outcome.to },
      );
    } catch (error) {
      // The new policy is in force either way; an operator must hear that its entry is missing.
      logger.error(
        { err: error, to: outcome.to },
        'policy reloaded, but its audit entry could not be written',
      );
    }
    return outcome;
  };
}

/**
 * Watches the policy file's folder (a mounted ConfigMap replaces a symlink, `..data`, rather than the file) and
 * reloads once a burst of changes settles. Returns the function that stops watching.
 */
export function watchPolicy(
  path: string,
  reload: (why: string) => Promise<unknown>,
  logger: Logger,
): () => void {
  const name = basename(path);
  let timer: NodeJS.Timeout | undefined;
  let watcher: FSWatcher;
  try {
    watcher = watch(dirname(path), (_event, changed) => {
      // Any file of the folder may be the one the policy's symlink points through; the reload compares versions.
      if (changed !== null && changed !== name && !changed.startsWith('..')) return;
      clearTimeout(timer);
      timer = setTimeout(() => void reload('file changed'), WATCH_SETTLE_MS);
    });
  } catch (error) {
    logger.warn({ err: error }, `POLICY_WATCH: cannot watch the folder of ${path}; SIGHUP still reloads it`);
    return () => undefined;
  }
  watcher.on('error', (error) => logger.warn({ err: error }, 'POLICY_WATCH: the watch stopped'));
  return () => {
    clearTimeout(timer);
    watcher.close();
  };
}
