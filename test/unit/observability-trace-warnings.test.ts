import { diag } from '@opentelemetry/api';
import { afterAll, describe, expect, it } from 'vitest';
import { loadEnv } from '../../src/config/env.ts';
import { tracingConfig } from '../../src/config/tracing-env.ts';
import { startTracing, stopTracing } from '../../src/observability/tracing.ts';

afterAll(async () => {
  await stopTracing(1_000);
});

describe("the SDK's warnings as the log gets them", () => {
  it('name what went wrong, not only the component that said it', async () => {
    const warnings: string[] = [];
    const config = tracingConfig(loadEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' }));
    await startTracing(config, { dropped: () => undefined, warn: (m) => warnings.push(m) }, '0.0.0');
    // What the OTLP exporter does when a collector answers 2xx with a body that is not OTLP.
    diag
      .createComponentLogger({ namespace: 'OTLPExportDelegate' })
      .warn(
        'Export succeeded but could not deserialize response - is the response specification compliant?',
        new SyntaxError('Unexpected token < in JSON at position 0'),
        { data: 'x'.repeat(5_000) },
      );
    expect(warnings).toHaveLength(1);
    const [why] = warnings;
    expect(why).not.toBe('OTLPExportDelegate');
    expect(why).toContain('Export succeeded but could not deserialize response');
    expect(why).toContain('Unexpected token < in JSON at position 0');
    expect(why?.length).toBeLessThanOrEqual(400);
  });
});
