/**
 * Tracing as the rest of the code sees it: spans around a piece of work, the request id on a request's spans, the
 * trace ids for log lines, BullMQ's telemetry hook. Until {@link startTracing} loads the OpenTelemetry SDK (only
 * when an `OTEL_*` variable asks for it) every function here runs the work and nothing else: no OpenTelemetry
 * module is imported by this file, so a bot without tracing never loads one.
 */
import type { Telemetry } from 'bullmq';
import type { TracingConfig } from '../config/tracing-env.ts';
import type { SpanHandle, SpanOptions, TracingBackend, TracingHooks } from './tracing-backend.ts';

export {
  type DropReason,
  REQUEST_ID_ATTRIBUTE,
  type SpanAttributes,
  type SpanHandle,
  type SpanKindName,
  type SpanOptions,
  type TracingBackend,
  type TracingHooks,
} from './tracing-backend.ts';

/** A span that records nothing: what work gets while tracing is off. */
const NO_SPAN: SpanHandle = { set: () => undefined, fail: () => undefined };

// One per process, like OpenTelemetry's own global provider: spans are made deep inside clients and workers that
// would otherwise each need the tracer passed in.
let backend: TracingBackend | undefined;
let starting: Promise<TracingBackend> | undefined;

/**
 * Loads the OpenTelemetry SDK and starts exporting, once per process; later calls get the same backend. Without a
 * config (tracing off) nothing is loaded and undefined is returned.
 */
export async function startTracing(
  config: TracingConfig | undefined,
  hooks: TracingHooks,
  version: string,
): Promise<TracingBackend | undefined> {
  if (config === undefined) return undefined;
  starting ??= import('./otel-sdk.ts').then(({ createTracingBackend }) =>
    createTracingBackend(config, hooks, version),
  );
  backend = await starting;
  return backend;
}

/**
 * Exports what is still queued within `budgetMs` (a collector that does not answer is given up on) and unregisters
 * the SDK, so spans stop here and a later start in the same process begins afresh.
 */
export async function stopTracing(budgetMs: number): Promise<void> {
  const stopping = backend;
  backend = undefined;
  starting = undefined;
  await stopping?.shutdown(budgetMs);
}

/** Whether spans are being recorded (the SDK is loaded). */
export function tracingOn(): boolean {
  return backend !== undefined;
}

/**
 * Runs `work` inside a span named `name`, ended when `work` settles; a rejection marks the span failed and is
 * passed on. With tracing off, `work` runs with a span that records nothing.
 */
export function inSpan<T>(
  name: string,
  options: SpanOptions,
  work: (span: SpanHandle) => Promise<T>,
): Promise<T> {
  return backend ? backend.span(name, options, work) : work(NO_SPAN);
}

/**
 * Runs `work` as part of request `requestId`: the current span and the interaction's first span get
 * `cloudops.request_id`, and so does every span started inside `work`, in this process or in a job it enqueues.
 */
export function withRequestId<T>(requestId: string, work: () => T): T {
  return backend ? backend.withRequestId(requestId, work) : work();
}

/** `trace_id` and `span_id` of the current span, for a log line; empty outside a span or with tracing off. */
export function traceLogFields(): Record<string, string> {
  return backend ? backend.logFields() : {};
}

/**
 * BullMQ's `telemetry` option (bullmq-otel): a job carries the trace context of the code that added it, and its
 * processing is a span of that trace. Undefined with tracing off, so BullMQ skips all of it.
 */
export function queueTelemetry(): Telemetry | undefined {
  return backend?.queueTelemetry;
}
