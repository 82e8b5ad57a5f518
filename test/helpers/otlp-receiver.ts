import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** One span as an OTLP/HTTP JSON export carries it, with its attributes flattened to plain values. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, string | number | boolean>;
  links: { traceId: string; spanId: string }[];
  status?: { code?: number; message?: string };
  service?: string;
}

/** An in-process OTLP/HTTP receiver (JSON encoding) on loopback, as a collector would listen on port 4318. */
export interface OtlpReceiver {
  /** Base URL to give as OTEL_EXPORTER_OTLP_ENDPOINT. */
  url: string;
  spans(): ReceivedSpan[];
  /** POSTs received (answered or not). */
  posts(): number;
  /** Every raw request body, as text. */
  bodies(): string[];
  /** Connections open now. */
  open(): number;
  close(): Promise<void>;
}

type AnyValue = {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
};
type KeyValue = { key: string; value: AnyValue };
type OtlpSpan = {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes?: KeyValue[];
  links?: { traceId: string; spanId: string }[];
  status?: { code?: number; message?: string };
};
type TracesRequest = {
  resourceSpans?: {
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: { spans?: OtlpSpan[] }[];
  }[];
};

function plain(value: AnyValue): string | number | boolean {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.boolValue !== undefined) return value.boolValue;
  return JSON.stringify(value);
}

function attributesOf(list: KeyValue[] | undefined): Record<string, string | number | boolean> {
  return Object.fromEntries((list ?? []).map((kv) => [kv.key, plain(kv.value)]));
}

/**
 * Starts the receiver. `hang`: accepts every connection and reads every request but never answers, like a collector
 * that is stuck. `trickle`: answers 200 at once, then sends its body a byte every 250 ms, never finishing it.
 */
export async function startOtlpReceiver(
  options: { hang?: boolean; trickle?: boolean } = {},
): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const bodies: string[] = [];
  const sockets = new Set<Socket>();
  let posts = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      posts += 1;
      const text = Buffer.concat(chunks).toString('utf8');
      bodies.push(text);
      if (options.hang) return;
      if (options.trickle) {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000000' });
        const drip = setInterval(() => res.write(' '), 250);
        res.on('close', () => clearInterval(drip));
        return;
      }
      if (req.url !== '/v1/traces' || !/json/.test(req.headers['content-type'] ?? '')) {
        res.writeHead(415).end();
        return;
      }
      const body = JSON.parse(text) as TracesRequest;
      for (const resourceSpans of body.resourceSpans ?? []) {
        const resource = attributesOf(resourceSpans.resource?.attributes);
        for (const scope of resourceSpans.scopeSpans ?? []) {
          for (const span of scope.spans ?? []) {
            spans.push({
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId || undefined,
              name: span.name,
              kind: span.kind,
              startNs: BigInt(span.startTimeUnixNano),
              endNs: BigInt(span.endTimeUnixNano),
              attributes: attributesOf(span.attributes),
              links: (span.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
              status: span.status,
              service: String(resource['service.name']),
            });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    spans: () => [...spans],
    posts: () => posts,
    bodies: () => [...bodies],
    open: () => sockets.size,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
