import type { Logger } from '../observability/logger.ts';

/** How long the bot believes `files:write` is missing before it tries an upload again (the app may be reinstalled). */
export const MISSING_SCOPE_RECHECK_MS = 60 * 60_000;

/** The scope charts are uploaded with. */
export const FILES_SCOPE = 'files:write';

/**
 * Whether charts can be uploaded: without `files:write` (seen at start-up in the token's scopes, or as
 * `missing_scope` from an upload) charts are skipped, and the log says so once per process.
 */
export class UploadScope {
  private missingSince?: number;
  private said = false;

  constructor(
    private readonly logger: Logger,
    private readonly clock: () => number = Date.now,
  ) {}

  /** False while the scope is known to be missing (rechecked hourly). */
  get usable(): boolean {
    if (this.missingSince === undefined) return true;
    if (this.clock() - this.missingSince >= MISSING_SCOPE_RECHECK_MS) {
      this.missingSince = undefined;
      return true;
    }
    return false;
  }

  /** The scope is missing: charts stop until the recheck; the first time, one warning line. */
  missing(where: 'start-up' | 'upload'): void {
    this.missingSince = this.clock();
    if (this.said) return;
    this.said = true;
    this.logger.warn(
      { scope: FILES_SCOPE, seenAt: where },
      `charts off: the Slack app lacks ${FILES_SCOPE}, so digests go out without their price chart (add the scope and reinstall the app, docs/charts.md)`,
    );
  }

  /** An upload went through: the scope is there. */
  granted(): void {
    this.missingSince = undefined;
  }
}
