import { describe, expect, it } from 'vitest';
import { ConfigError, loadEnv } from '../../src/config/env.ts';
import { tracingConfig, tracingSecrets } from '../../src/config/tracing-env.ts';

describe('OTEL_* variables', () => {
  it('trace only when an endpoint or OTEL_TRACES_EXPORTER=otlp asks for it', () => {
    expect(tracingConfig(loadEnv({}))).toBeUndefined();
    // Variables that configure tracing without turning it on leave it off.
    expect(
      tracingConfig(loadEnv({ OTEL_SERVICE_NAME: 'ops', OTEL_BSP_MAX_QUEUE_SIZE: '10' })),
    ).toBeUndefined();
    expect(tracingConfig(loadEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }))?.url).toBe(
      'http://collector:4318/v1/traces',
    );
    expect(tracingConfig(loadEnv({ OTEL_TRACES_EXPORTER: 'otlp' }))?.url).toBe(
      'http://localhost:4318/v1/traces',
    );
    // The signal's own endpoint is used as written.
    expect(
      tracingConfig(loadEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://tempo.example/otlp/v1/traces' }))
        ?.url,
    ).toBe('https://tempo.example/otlp/v1/traces');
    for (const off of [{ OTEL_TRACES_EXPORTER: 'none' }, { OTEL_SDK_DISABLED: 'true' }]) {
      expect(
        tracingConfig(loadEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', ...off })),
      ).toBeUndefined();
    }
  });

  it('takes the protocol, headers, timeouts and the batch queue’s bounds from the standard variables', () => {
    const config = tracingConfig(
      loadEnv({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=abc%3D%3D,x-team=ops',
        OTEL_EXPORTER_OTLP_TIMEOUT: '2500',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=prod,service.name=from-attributes',
        OTEL_BSP_SCHEDULE_DELAY: '200',
        OTEL_BSP_EXPORT_TIMEOUT: '4000',
        OTEL_BSP_MAX_QUEUE_SIZE: '100',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '500',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
      }),
    );
    expect(config).toEqual({
      url: 'http://collector:4318/v1/traces',
      protocol: 'http/json',
      headers: { 'x-api-key': 'abc==', 'x-team': 'ops' },
      exportTimeoutMs: 2500,
      serviceName: 'from-attributes',
      resourceAttributes: { 'deployment.environment': 'prod', 'service.name': 'from-attributes' },
      // A batch is never larger than the queue.
      batch: { scheduledDelayMs: 200, exportTimeoutMs: 4000, maxQueueSize: 100, maxExportBatchSize: 100 },
      sampler: { name: 'parentbased_traceidratio', ratio: 0.25 },
    });
    const defaults = tracingConfig(loadEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }));
    expect(defaults).toMatchObject({
      protocol: 'http/protobuf',
      serviceName: 'cloudops',
      exportTimeoutMs: 10_000,
      sampler: { name: 'parentbased_always_on', ratio: 1 },
      batch: { scheduledDelayMs: 5000, exportTimeoutMs: 30_000, maxQueueSize: 2048, maxExportBatchSize: 512 },
    });
  });

  it('the exporter headers are secrets: their values are scrubbed from the log', () => {
    const env = loadEnv({
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Basic%20dXNlcjpwYXNz',
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-honeycomb-team=hc_secret_value',
    });
    expect(tracingSecrets(env)).toEqual(['Basic dXNlcjpwYXNz', 'hc_secret_value']);
  });

  it('a value the bot cannot use stops the start-up with the variable named, never its value', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [
        { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' },
        /^OTEL_EXPORTER_OTLP_ENDPOINT: expected an http\(s\) URL/,
      ],
      [
        { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
        /^OTEL_EXPORTER_OTLP_PROTOCOL: grpc is not supported; use http\/protobuf or http\/json/,
      ],
      [{ OTEL_TRACES_EXPORTER: 'zipkin' }, /^OTEL_TRACES_EXPORTER: expected otlp or none/],
      [{ OTEL_BSP_MAX_QUEUE_SIZE: '0' }, /^OTEL_BSP_MAX_QUEUE_SIZE: expected at least 1 span/],
      [{ OTEL_TRACES_SAMPLER: 'sometimes' }, /^OTEL_TRACES_SAMPLER: expected one of always_on, /],
      [{ OTEL_TRACES_SAMPLER: 'jaeger_remote' }, /^OTEL_TRACES_SAMPLER: .*remote samplers/],
      [{ OTEL_TRACES_SAMPLER_ARG: '2' }, /^OTEL_TRACES_SAMPLER_ARG: expected a ratio from 0 to 1/],
      [
        { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_HEADERS: 'no-equals-sign-secret' },
        /^OTEL_EXPORTER_OTLP_HEADERS: expected key=value pairs/,
      ],
    ];
    for (const [raw, message] of cases) {
      let caught: unknown;
      try {
        loadEnv(raw);
      } catch (error) {
        caught = error;
      }
      expect(caught, JSON.stringify(raw)).toBeInstanceOf(ConfigError);
      expect((caught as Error).message).toMatch(message);
      expect((caught as Error).message).not.toContain('no-equals-sign-secret');
    }
  });
});
