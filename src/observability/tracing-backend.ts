import type { Telemetry } from 'bullmq';

// The contract between tracing.ts (what the code calls) and otel-sdk.ts (the SDK it loads on demand): both import
// it, so neither imports the other's module but tracing.ts loading the SDK.

/** The span kinds the bot uses (OpenTelemetry's SpanKind, by name so this file imports nothing of the SDK). */
export type SpanKindName = 'internal' | 'server' | 'client' | 'producer' | 'consumer';

/** Attribute values; undefined ones are left out. Never a secret or text someone typed. */
export type SpanAttributes = Record<string, string | number | boolean | undefined>;

/** The attribute that ties every span of a request's life together, across traces. */
export const REQUEST_ID_ATTRIBUTE = 'cloudops.request_id';

/** The span a piece of work runs in. */
export interface SpanHandle {
  set(attributes: SpanAttributes): void;
  /** Marks the span failed with the error's class and code; its message is left out (it may quote user text). */
  fail(error: unknown): void;
}

export interface SpanOptions {
  kind?: SpanKindName;
  attributes?: SpanAttributes;
}

/** What the SDK module implements; see the functions below for each one's meaning. */
export interface TracingBackend {
  span<T>(name: string, options: SpanOptions, work: (span: SpanHandle) => Promise<T>): Promise<T>;
  withRequestId<T>(requestId: string, work: () => T): T;
  logFields(): Record<string, string>;
  queueTelemetry: Telemetry;
  /** Exports what is queued, within `budgetMs`, and unregisters the SDK's globals. */
  shutdown(budgetMs: number): Promise<void>;
}

/** Why spans were lost: the bounded queue was full, or their export failed (collector down, slow or refusing). */
export type DropReason = 'queue_full' | 'export_failed';

/** What the SDK reports back to the bot. */
export interface TracingHooks {
  dropped(reason: DropReason, count: number): void;
  /** The SDK's own warnings (an export that failed), as one log line each. */
  warn(message: string): void;
}
