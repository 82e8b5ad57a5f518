import type { Logger } from '../observability/logger.ts';
import type { UserGroups } from '../requests/approval/approvers.ts';
import type { SlackApi } from '../slack-api/client.ts';
import { SlackPlatformError } from '../slack-api/errors.ts';

/** How long a group's members are trusted without asking Slack again. */
export const GROUP_CACHE_MS = 5 * 60_000;
/** A refresh forced by a click is not repeated sooner than this, so clicks by outsiders cannot flood Slack. */
export const GROUP_REFRESH_GAP_MS = 15_000;

interface Entry {
  /** Undefined: Slack would not resolve the group (it grants nobody). */
  users?: readonly string[];
  error?: string;
  fetchedAt: number;
}

/**
 * Members of Slack user groups (`usergroups.users.list`), cached for minutes. A group Slack will not resolve
 * (missing scope, free plan, unknown id) grants nobody and is logged once per fetch.
 */
export function createUserGroups(
  client: Pick<SlackApi, 'usergroups'>,
  options: { logger: Logger; cacheMs?: number; refreshGapMs?: number; clock?: () => number },
): UserGroups & { problem(group: string): Promise<string | undefined> } {
  const cacheMs = options.cacheMs ?? GROUP_CACHE_MS;
  const refreshGapMs = options.refreshGapMs ?? GROUP_REFRESH_GAP_MS;
  const clock = options.clock ?? (() => performance.now());
  const cache = new Map<string, Entry>();
  const inFlight = new Map<string, Promise<Entry>>();

  const fetch = (group: string): Promise<Entry> => {
    let pending = inFlight.get(group);
    if (!pending) {
      pending = client.usergroups.users
        .list({ usergroup: group })
        .then(
          (answer): Entry => ({
            users: (answer.users ?? []).filter((u) => typeof u === 'string'),
            fetchedAt: clock(),
          }),
          (error: unknown): Entry => {
            const code = error instanceof SlackPlatformError ? error.error : undefined;
            const stale = cache.get(group);
            // Slack out of reach: what was known stays known; Slack refusing the group: it grants nobody.
            if (!code && stale?.users) return { ...stale, fetchedAt: clock() };
            options.logger.warn(
              { group, error: code ?? 'no answer' },
              'a user group could not be resolved: it grants nobody',
            );
            return { error: code ?? 'no answer', fetchedAt: clock() };
          },
        )
        .then((entry) => {
          cache.set(group, entry);
          return entry;
        })
        .finally(() => inFlight.delete(group));
      inFlight.set(group, pending);
    }
    return pending;
  };

  return {
    async members(group, refresh = false) {
      const entry = cache.get(group);
      const age = entry ? clock() - entry.fetchedAt : Number.POSITIVE_INFINITY;
      if (entry && age < (refresh ? refreshGapMs : cacheMs)) return entry.users;
      return (await fetch(group)).users;
    },
    /** Why Slack will not resolve `group` (asked now), or undefined when it does. */
    async problem(group) {
      const entry = await fetch(group);
      return entry.users ? undefined : (entry.error ?? 'unresolved');
    },
  };
}
