/**
 * The OpenTelemetry SDK, loaded by `tracing.ts` only when tracing is configured. Spans go through a bounded
 * batch queue to an OTLP/HTTP exporter with a deadline per export: a collector that is down or hangs costs the bot
 * the spans it drops (counted), never a wait.
 */
import {
  type Attributes,
  context,
  createContextKey,
  createNoopMeter,
  DiagLogLevel,
  diag,
  type Meter,
  type MeterProvider,
  propagation,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  type SpanProcessor,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { BullMQOtel } from 'bullmq-otel';
import { outboundDispatcher, proxyConfigured } from '../config/outbound.ts';
import type { TracingConfig } from '../config/tracing-env.ts';
import { otlpHttpExporter } from './otlp-exporter.ts';
import {
  REQUEST_ID_ATTRIBUTE,
  type SpanAttributes,
  type SpanHandle,
  type SpanKindName,
  type TracingBackend,
  type TracingHooks,
} from './tracing-backend.ts';

const KINDS: Record<SpanKindName, SpanKind> = {
  internal: SpanKind.INTERNAL,
  server: SpanKind.SERVER,
  client: SpanKind.CLIENT,
  producer: SpanKind.PRODUCER,
  consumer: SpanKind.CONSUMER,
};

/** The first span of an interaction (or of later work's own trace): it gets the request id once that is known. */
const ROOT_SPAN = createContextKey('cloudops.root_span');

/** The batch processor's own count of finished spans; those with `error.type` were dropped or failed to export. */
const PROCESSED_SPANS = 'otel.sdk.processor.span.processed';

/** The SDK's warnings reach the log at most this often: a collector that stays down must not flood it. */
const WARN_EVERY_MS = 60_000;

/** How long a warning of the SDK may get in the log: a response body it attaches must not fill a line. */
const MAX_WARNING_CHARS = 300;

/**
 * One sentence from a diag call. A component logger passes its name as `message` and what happened in `args`
 * (text, an error), so the name alone would say nothing: the text and the errors' messages follow it. Other
 * arguments (a response body, a payload) are left out.
 */
function diagLine(message: string, args: unknown[]): string {
  const parts = [message];
  for (const arg of args) {
    if (typeof arg === 'string') parts.push(arg);
    else if (arg instanceof Error) parts.push(`${arg.name}: ${arg.message}`);
  }
  const line = parts.join(': ');
  return line.length > MAX_WARNING_CHARS ? `${line.slice(0, MAX_WARNING_CHARS)}…` : line;
}

/** Builds the provider, registers it (and the context manager and propagators) globally, and returns the backend. */
export async function createTracingBackend(
  config: TracingConfig,
  hooks: TracingHooks,
  version: string,
): Promise<TracingBackend> {
  let lastWarn = 0;
  diag.setLogger(
    {
      error: (message, ...args) => warnSometimes(diagLine(message, args)),
      warn: (message, ...args) => warnSometimes(diagLine(message, args)),
      info: () => undefined,
      debug: () => undefined,
      verbose: () => undefined,
    },
    DiagLogLevel.WARN,
  );
  function warnSometimes(message: string) {
    const now = Date.now();
    if (now - lastWarn < WARN_EVERY_MS) return;
    lastWarn = now;
    hooks.warn(message);
  }

  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(
    new CompositePropagator({
      propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()],
    }),
  );
  const proxy = config.proxy ?? {};
  const exporter = otlpHttpExporter({
    url: config.url,
    protocol: config.protocol,
    headers: config.headers,
    timeoutMs: config.exportTimeoutMs,
    // Through the outbound proxy when one is set (docs/configuration.md#outbound-proxy); else undici's global one.
    ...(proxyConfigured(proxy) ? { dispatcher: outboundDispatcher(proxy) } : {}),
  });
  const batch = new BatchSpanProcessor({
    exporter,
    maxQueueSize: config.batch.maxQueueSize,
    maxExportBatchSize: config.batch.maxExportBatchSize,
    scheduledDelayMillis: config.batch.scheduledDelayMs,
    exportTimeoutMillis: config.batch.exportTimeoutMs,
    selfObsMeterProvider: dropCounter(hooks),
  });
  const provider = new TracerProvider({
    resource: resourceFromAttributes({
      ...config.resourceAttributes,
      'service.name': config.serviceName,
      'service.version': version,
    }),
    spanProcessors: [requestIdProcessor(), batch],
    sampler: sampler(config.sampler),
  });
  trace.setGlobalTracerProvider(provider);
  const tracer = provider.getTracer('cloudops', version);

  return {
    span(name, options, work) {
      const parent = context.active();
      const span = tracer.startSpan(
        name,
        { kind: KINDS[options.kind ?? 'internal'], attributes: defined(options.attributes) },
        parent,
      );
      let inner = trace.setSpan(parent, span);
      if (parent.getValue(ROOT_SPAN) === undefined) inner = inner.setValue(ROOT_SPAN, span);
      const handle = spanHandle(span);
      return context.with(inner, async () => {
        try {
          return await work(handle);
        } catch (error) {
          handle.fail(error);
          throw error;
        } finally {
          span.end();
        }
      });
    },
    withRequestId(requestId, work) {
      const active = context.active();
      for (const span of [trace.getSpan(active), active.getValue(ROOT_SPAN) as Span | undefined]) {
        if (span?.isRecording()) span.setAttribute(REQUEST_ID_ATTRIBUTE, requestId);
      }
      const baggage = (propagation.getBaggage(active) ?? propagation.createBaggage()).setEntry(
        REQUEST_ID_ATTRIBUTE,
        { value: requestId },
      );
      return context.with(propagation.setBaggage(active, baggage), work);
    },
    logFields(): Record<string, string> {
      const span = trace.getSpan(context.active());
      if (!span) return {};
      const { traceId, spanId } = span.spanContext();
      return { trace_id: traceId, span_id: spanId };
    },
    queueTelemetry: new BullMQOtel({ tracerName: 'cloudops', version }),
    async shutdown(budgetMs) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, budgetMs);
        timer.unref();
      });
      await Promise.race([provider.shutdown().catch(() => undefined), late]).finally(() =>
        clearTimeout(timer),
      );
      trace.disable();
      context.disable();
      propagation.disable();
      diag.disable();
    },
  };
}

/** The sampler OTEL_TRACES_SAMPLER names; the parent-based ones follow an incoming trace's decision. */
function sampler({ name, ratio }: TracingConfig['sampler']): Sampler {
  const root: Sampler = name.endsWith('always_off')
    ? new AlwaysOffSampler()
    : name.endsWith('traceidratio')
      ? new TraceIdRatioBasedSampler(ratio)
      : new AlwaysOnSampler();
  return name.startsWith('parentbased_') ? new ParentBasedSampler({ root }) : root;
}

/** Copies the request id carried in the context (baggage, also across jobs) onto every span started in it. */
function requestIdProcessor(): SpanProcessor {
  return {
    onStart(span, parent) {
      const requestId = propagation.getBaggage(parent)?.getEntry(REQUEST_ID_ATTRIBUTE)?.value;
      if (requestId) span.setAttribute(REQUEST_ID_ATTRIBUTE, requestId);
    },
    onEnd: () => undefined,
    forceFlush: () => Promise.resolve(),
    shutdown: () => Promise.resolve(),
  };
}

/**
 * A meter provider that the batch processor reports its spans to: those it dropped (queue full) or could not export
 * go to `hooks.dropped`; every other instrument is a no-op.
 */
function dropCounter(hooks: TracingHooks): MeterProvider {
  const noop = createNoopMeter();
  const meter: Meter = Object.create(noop, {
    createCounter: {
      value: (name: string, options?: Parameters<Meter['createCounter']>[1]) => {
        if (name !== PROCESSED_SPANS) return noop.createCounter(name, options);
        return {
          add(count: number, attributes?: Attributes) {
            const error = attributes?.['error.type'];
            if (error === undefined) return;
            hooks.dropped(error === 'queue_full' ? 'queue_full' : 'export_failed', count);
          },
        };
      },
    },
  });
  return { getMeter: () => meter };
}

function spanHandle(span: Span): SpanHandle {
  return {
    set: (attributes) => span.setAttributes(defined(attributes)),
    fail(error) {
      const fields = error as { name?: unknown; code?: unknown } | undefined;
      const type = String(fields?.code ?? fields?.name ?? 'Error');
      span.setAttribute('error.type', type);
      span.setStatus({ code: SpanStatusCode.ERROR, message: type });
    },
  };
}

function defined(attributes: SpanAttributes | undefined): Attributes {
  const out: Attributes = {};
  for (const [key, value] of Object.entries(attributes ?? {})) if (value !== undefined) out[key] = value;
  return out;
}
