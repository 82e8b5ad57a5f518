import { z } from 'zod';
import type { ProxyEnv } from './outbound.ts';

/** The OpenTelemetry protocols the bot can export with: OTLP over HTTP, as protobuf (the standard's default) or JSON. */
export const OTLP_PROTOCOLS = ['http/protobuf', 'http/json'] as const;
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

const endpoint = z.string().refine((v) => /^https?:\/\//.test(v) && URL.canParse(v), {
  message: 'expected an http(s) URL of an OTLP/HTTP receiver, such as http://otel-collector:4318',
});

const protocol = z.enum([...OTLP_PROTOCOLS, 'grpc'], {
  message: 'expected http/protobuf or http/json',
});

const millis = (example: number) =>
  z.coerce
    .number({ message: `expected milliseconds, such as ${example}` })
    .int({ message: `expected whole milliseconds, such as ${example}` })
    .min(1, { message: `expected milliseconds above 0, such as ${example}` })
    .max(600_000, { message: 'expected at most 600000 milliseconds' });

const count = (example: number) =>
  z.coerce
    .number({ message: `expected a number of spans, such as ${example}` })
    .int({ message: `expected a whole number of spans, such as ${example}` })
    .min(1, { message: `expected at least 1 span, such as ${example}` })
    .max(1_000_000, { message: 'expected at most 1000000 spans' });

/** The standard samplers (OTEL_TRACES_SAMPLER) that run in the process; remote ones would call a service. */
export const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
export type SamplerName = (typeof SAMPLERS)[number];

/**
 * The standard `OTEL_*` variables the bot reads (docs/tracing.md). They are part of the one environment schema so
 * a `.env` file sets them too and a bad value stops the start-up with the variable's name.
 */
export const TRACING_ENV_SHAPE = {
  OTEL_SDK_DISABLED: z.enum(['true', 'false'], { message: 'expected true or false' }).optional(),
  /** `otlp` turns tracing on (to http://localhost:4318 unless an endpoint is set), `none` off. */
  OTEL_TRACES_EXPORTER: z.enum(['otlp', 'none'], { message: 'expected otlp or none' }).optional(),
  OTEL_EXPORTER_OTLP_ENDPOINT: endpoint.optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: endpoint.optional(),
  OTEL_EXPORTER_OTLP_PROTOCOL: protocol.optional(),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: protocol.optional(),
  /** `key=value,key=value`, such as a vendor's API key: treated as a secret (never logged). */
  OTEL_EXPORTER_OTLP_HEADERS: z.string().optional(),
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: z.string().optional(),
  OTEL_EXPORTER_OTLP_TIMEOUT: millis(10_000).optional(),
  OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: millis(10_000).optional(),
  OTEL_SERVICE_NAME: z.string().min(1).max(200).optional(),
  OTEL_RESOURCE_ATTRIBUTES: z.string().optional(),
  OTEL_BSP_SCHEDULE_DELAY: millis(5_000).optional(),
  OTEL_BSP_EXPORT_TIMEOUT: millis(30_000).optional(),
  OTEL_BSP_MAX_QUEUE_SIZE: count(2048).optional(),
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: count(512).optional(),
  /** Which traces are kept: the standard's samplers that need no remote service; parent-based always-on by default. */
  OTEL_TRACES_SAMPLER: z
    .enum(SAMPLERS, {
      message: `expected one of ${SAMPLERS.join(', ')} (remote samplers such as jaeger_remote are not supported)`,
    })
    .optional(),
  /** The ratio of a `…traceidratio` sampler, from 0 to 1 (default 1). */
  OTEL_TRACES_SAMPLER_ARG: z.coerce
    .number({ message: 'expected a ratio from 0 to 1, such as 0.25' })
    .min(0, { message: 'expected a ratio from 0 to 1, such as 0.25' })
    .max(1, { message: 'expected a ratio from 0 to 1, such as 0.25' })
    .optional(),
};

type TracingEnv = { [K in keyof typeof TRACING_ENV_SHAPE]: z.infer<(typeof TRACING_ENV_SHAPE)[K]> };

/** What the tracing SDK is started with; undefined from {@link tracingConfig} means no tracing at all. */
export interface TracingConfig {
  /** The full URL spans are POSTed to (…/v1/traces). */
  url: string;
  protocol: OtlpProtocol;
  headers: Record<string, string>;
  /** One export's deadline (OTEL_EXPORTER_OTLP_TIMEOUT). */
  exportTimeoutMs: number;
  serviceName: string;
  resourceAttributes: Record<string, string>;
  /** Which traces are recorded and exported; `ratio` for the traceidratio samplers. */
  sampler: { name: SamplerName; ratio: number };
  /** The bounded queue of finished spans (OTEL_BSP_*): past `maxQueueSize` spans are dropped, never waited for. */
  /** The outbound proxy the exporter goes through (docs/configuration.md#outbound-proxy). */
  proxy?: ProxyEnv;
  batch: {
    scheduledDelayMs: number;
    exportTimeoutMs: number;
    maxQueueSize: number;
    maxExportBatchSize: number;
  };
}

/** The standard's defaults: one export waits 10 s at most, the batch processor gives up on it after 30 s. */
const DEFAULTS = {
  endpoint: 'http://localhost:4318',
  exportTimeoutMs: 10_000,
  batchExportTimeoutMs: 30_000,
  scheduledDelayMs: 5_000,
  maxQueueSize: 2048,
  maxExportBatchSize: 512,
};

/** Thrown for an `OTEL_*` value the bot cannot use; the message names the variable. */
export class TracingConfigError extends Error {
  override readonly name = 'TracingConfigError';
  readonly code = 'TRACING_CONFIG_INVALID';
}

/**
 * Whether to trace, and where to: on when `OTEL_TRACES_EXPORTER=otlp` or an OTLP endpoint is set, off when
 * neither is, or `OTEL_TRACES_EXPORTER=none`, or `OTEL_SDK_DISABLED=true`.
 */
export function tracingConfig(env: Partial<TracingEnv>): TracingConfig | undefined {
  if (env.OTEL_SDK_DISABLED === 'true' || env.OTEL_TRACES_EXPORTER === 'none') return undefined;
  const signal = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (env.OTEL_TRACES_EXPORTER === undefined && signal === undefined && base === undefined) return undefined;
  const protocol =
    env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf';
  if (protocol === 'grpc') {
    const name = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
      ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'
      : 'OTEL_EXPORTER_OTLP_PROTOCOL';
    throw new TracingConfigError(
      `${name}: grpc is not supported; use http/protobuf or http/json (an OTLP receiver's HTTP port, usually 4318)`,
    );
  }
  const url = signal ?? `${(base ?? DEFAULTS.endpoint).replace(/\/+$/, '')}/v1/traces`;
  const headers = {
    ...keyValues(env.OTEL_EXPORTER_OTLP_HEADERS, 'OTEL_EXPORTER_OTLP_HEADERS'),
    ...keyValues(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS, 'OTEL_EXPORTER_OTLP_TRACES_HEADERS'),
  };
  const resourceAttributes = keyValues(env.OTEL_RESOURCE_ATTRIBUTES, 'OTEL_RESOURCE_ATTRIBUTES');
  const maxQueueSize = env.OTEL_BSP_MAX_QUEUE_SIZE ?? DEFAULTS.maxQueueSize;
  const exportTimeoutMs =
    env.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT ?? env.OTEL_EXPORTER_OTLP_TIMEOUT ?? DEFAULTS.exportTimeoutMs;
  return {
    url,
    protocol,
    headers,
    exportTimeoutMs,
    serviceName: env.OTEL_SERVICE_NAME ?? resourceAttributes['service.name'] ?? 'cloudops',
    resourceAttributes,
    sampler: {
      name: env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on',
      ratio: env.OTEL_TRACES_SAMPLER_ARG ?? 1,
    },
    batch: {
      scheduledDelayMs: env.OTEL_BSP_SCHEDULE_DELAY ?? DEFAULTS.scheduledDelayMs,
      exportTimeoutMs: env.OTEL_BSP_EXPORT_TIMEOUT ?? DEFAULTS.batchExportTimeoutMs,
      maxQueueSize,
      // A batch larger than the queue could never fill: the standard says to cap it.
      maxExportBatchSize: Math.min(
        env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE ?? DEFAULTS.maxExportBatchSize,
        maxQueueSize,
      ),
    },
  };
}

/** The values of `OTEL_EXPORTER_OTLP_HEADERS`: secrets to scrub from every log line. */
export function tracingSecrets(env: Partial<TracingEnv>): string[] {
  return [env.OTEL_EXPORTER_OTLP_HEADERS, env.OTEL_EXPORTER_OTLP_TRACES_HEADERS]
    .flatMap((value, i) =>
      Object.values(
        keyValues(value, i === 0 ? 'OTEL_EXPORTER_OTLP_HEADERS' : 'OTEL_EXPORTER_OTLP_TRACES_HEADERS'),
      ),
    )
    .filter((v) => v.length > 0);
}

/** `a=1,b=2` (values percent-encoded, as the standard says) → `{ a: '1', b: '2' }`; a malformed pair names the variable. */
function keyValues(value: string | undefined, name: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (value === undefined) return out;
  for (const pair of value.split(',')) {
    if (pair.trim() === '') continue;
    const at = pair.indexOf('=');
    const key = at > 0 ? pair.slice(0, at).trim() : '';
    if (key === '') throw new TracingConfigError(`${name}: expected key=value pairs separated by commas`);
    try {
      out[key] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      // The value is not echoed: it may be a credential.
      throw new TracingConfigError(`${name}: the value of ${key} is not valid percent-encoding`);
    }
  }
  return out;
}
