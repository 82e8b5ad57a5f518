/**
 * The OTLP/HTTP span exporter: the standard's serializers, sent with undici under one deadline for the whole export
 * (connect, headers and the whole response body). The SDK's own exporters time an export out only while the collector
 * is silent, so a collector that answered 200 and then trickled its body kept each export, its connection and its
 * spans, open for ever.
 */
import { type ExportResult, ExportResultCode } from '@opentelemetry/core';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';
import { type Dispatcher, request } from 'undici';
import type { OtlpProtocol } from '../config/tracing-env.ts';

/** An export that did not reach a 2xx: the message says why in words an operator can act on, never a header value. */
export class OtlpExportError extends Error {
  override readonly name = 'OtlpExportError';
  readonly code = 'OTLP_EXPORT_FAILED';
}

export interface OtlpExporterOptions {
  url: string;
  protocol: OtlpProtocol;
  headers: Record<string, string>;
  /** The deadline of one whole export, in ms. */
  timeoutMs: number;
  /** Where connections come from (a proxy agent, a test's pool); undici's global dispatcher when absent. */
  dispatcher?: Dispatcher;
}

/** A {@link SpanExporter} that POSTs each batch once and reports FAILED on any error; the batch processor drops it. */
export function otlpHttpExporter(options: OtlpExporterOptions): SpanExporter {
  const json = options.protocol === 'http/json';
  const serializer = json ? JsonTraceSerializer : ProtobufTraceSerializer;
  const headers = {
    ...options.headers,
    'content-type': json ? 'application/json' : 'application/x-protobuf',
  };
  const where = new URL(options.url).origin;
  const pending = new Set<Promise<void>>();
  let stopped = false;

  async function send(body: Uint8Array): Promise<void> {
    const signal = AbortSignal.timeout(options.timeoutMs);
    let status: number;
    try {
      const response = await request(options.url, {
        method: 'POST',
        headers,
        body,
        signal,
        ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
      });
      status = response.statusCode;
      // Read to the end under the same deadline: the export is over only when the body is.
      for await (const _ of response.body) void _;
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      throw signal.aborted
        ? new OtlpExportError(
            `the collector at ${where} did not finish answering within ${options.timeoutMs} ms`,
          )
        : new OtlpExportError(`the collector at ${where} could not be reached (${String(code ?? 'error')})`);
    }
    if (status < 200 || status >= 300)
      throw new OtlpExportError(`the collector at ${where} answered HTTP ${status}`);
  }

  return {
    export(spans: ReadableSpan[], done: (result: ExportResult) => void) {
      if (stopped) {
        done({ code: ExportResultCode.FAILED, error: new OtlpExportError('the exporter is shut down') });
        return;
      }
      const body = serializer.serializeRequest(spans);
      if (!body) {
        done({
          code: ExportResultCode.FAILED,
          error: new OtlpExportError('the spans could not be serialized'),
        });
        return;
      }
      const sent = send(body).then(
        () => done({ code: ExportResultCode.SUCCESS }),
        (error: Error) => done({ code: ExportResultCode.FAILED, error }),
      );
      pending.add(sent);
      void sent.finally(() => pending.delete(sent));
    },
    async forceFlush() {
      await Promise.allSettled(pending);
    },
    async shutdown() {
      stopped = true;
      await Promise.allSettled(pending);
    },
  };
}
