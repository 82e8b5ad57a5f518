/**
 * The cloud API checked at start-up without holding it (docs/troubleshooting.md#cloud-api): unreachable or the key
 * refused is one warning line, `"cloud": false` in /readyz's body (its status stays 200: a cloud outage must not
 * restart the bot) and `cloudops_cloud_api_up` 0, until a later check succeeds; then one line saying so.
 */
import { probeCloudApi } from '../cloud/probe.ts';
import type { ProxyEnv } from '../config/outbound.ts';
import type { Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';

/** How often the API is checked again while it is down, and while it is up (a key revoked later is caught too). */
export interface CloudCheckPolicy {
  downEveryMs: number;
  upEveryMs: number;
}

export const CLOUD_CHECK: CloudCheckPolicy = { downEveryMs: 30_000, upEveryMs: 5 * 60_000 };

/** The API's state as the last check found it. */
export interface CloudCheck {
  /** False until a check succeeded, and again while the last one failed. */
  up(): boolean;
  stop(): void;
}

/** Starts checking at once, in the background; nothing awaits it. */
export function startCloudCheck(
  deps: {
    url: string | undefined;
    apiKey: string | undefined;
    logger: Logger;
    metrics: Metrics;
    proxy?: ProxyEnv;
  },
  policy: CloudCheckPolicy = CLOUD_CHECK,
): CloudCheck {
  let up = false;
  let known = false;
  let failedChecks = 0;
  let checking = false;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  deps.metrics.cloudApiUp.set(0);

  const schedule = (ms: number) => {
    clearTimeout(timer);
    if (!stopped) timer = setTimeout(check, ms).unref();
  };
  const check = () => {
    if (checking) return;
    checking = true;
    void (async () => {
      const probe = deps.url
        ? await probeCloudApi(deps.url, deps.apiKey, undefined, deps.proxy)
        : ({ reachable: false, why: 'CLOUD_API_URL is not set' } as const);
      if (stopped) return;
      const why = !probe.reachable ? probe.why : probe.keyAccepted === false ? probe.why : undefined;
      if (why === undefined) {
        if (!up && known)
          deps.logger.info({ failedChecks }, 'cloud API reachable again and the API key accepted');
        up = true;
        failedChecks = 0;
      } else {
        // One line when it goes (or at start-up), none while it stays down.
        if (up || !known)
          deps.logger.warn(
            { why },
            `cloud API check failed: ${why}; the bot runs, but resizes, restores and prices fail until it passes (cloudops doctor)`,
          );
        up = false;
        failedChecks += 1;
      }
      known = true;
      deps.metrics.cloudApiUp.set(up ? 1 : 0);
      schedule(up ? policy.upEveryMs : policy.downEveryMs);
    })().finally(() => {
      checking = false;
    });
  };
  check();
  return {
    up: () => up,
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
