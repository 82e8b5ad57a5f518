import type { Env } from '../config/env.ts';
import type { ProxyEnv } from '../config/outbound.ts';
import { type TracingConfig, tracingConfig, tracingSecrets } from '../config/tracing-env.ts';
import type { Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import {
  inSpan,
  REQUEST_ID_ATTRIBUTE,
  startTracing,
  type TracingBackend,
  withRequestId,
} from '../observability/tracing.ts';
import type { RequestLifecycle } from '../requests/lifecycle/request-lifecycle.ts';
import type { Decision } from '../requests/model/decision.ts';

/**
 * Starts tracing when the `OTEL_*` variables ask for it (docs/tracing.md): lost spans are counted in `metrics`, the
 * SDK's warnings go to the log `logger()` returns (the logger is made after tracing, to carry the trace ids).
 */
export function startProcessTracing(
  env: Env,
  metrics: Metrics,
  logger: () => Logger | undefined,
  version: string,
): Promise<TracingBackend | undefined> {
  return startTracing(
    withProxy(tracingConfig(env), env),
    {
      dropped: (reason, count) => metrics.traceSpansDropped.inc({ reason }, count),
      warn: (message) => logger()?.warn({ why: message }, 'trace export problem; spans may be lost'),
    },
    version,
  );
}

/** The `OTEL_*` values that are secrets (a vendor's key in the exporter headers): scrubbed from every log line. */
export { tracingSecrets };

/** The lifecycle's acts, each the span of one decision; taken from the request (or its id) they are given. */
const ACTS = [
  'createResize',
  'createRestore',
  'approve',
  'approveVerified',
  'breakGlass',
  'breakGlassVerified',
  'reject',
  'cancel',
  'resolve',
  'expire',
  'queueApproved',
  'endFreeze',
  'remind',
  'escalate',
] as const;

/**
 * Makes each of the lifecycle's decisions a span (`cloudops.request.approve`, …) carrying the request id, which
 * from then on marks every span of the interaction and of the jobs it enqueues. Acts that run outside a Slack
 * request (a reminder, a freeze's or a lease's end) start a trace of their own, found by the same request id.
 * Applied only with tracing on: the lifecycle itself knows nothing of tracing.
 */
export function traceLifecycle(requests: RequestLifecycle): void {
  for (const act of ACTS) {
    const original = requests[act] as (...args: unknown[]) => Promise<unknown>;
    Object.defineProperty(requests, act, {
      configurable: true,
      value: (...args: unknown[]) => traced(act, args, () => original.apply(requests, args)),
    });
  }
  const due = requests.leases.due;
  Object.defineProperty(requests.leases, 'due', {
    configurable: true,
    value: (requestId: string) => traced('leaseDue', [requestId], () => due.call(requests.leases, requestId)),
  });
}

function traced<T>(act: string, args: unknown[], run: () => Promise<T>): Promise<T> {
  const first = args[0];
  const requestId = typeof first === 'string' ? first : idOf(first);
  const span = () =>
    inSpan(`cloudops.request.${act}`, { attributes: { 'cloudops.act': act } }, async (handle) => {
      const result = await run();
      if (isDecision(result)) {
        handle.set({
          'cloudops.decision': result.ok ? 'ok' : result.refusal.code,
          'cloudops.state': result.ok ? result.request.state : undefined,
        });
      } else {
        // A request just created: its id is known only now.
        const created = idOf(result);
        if (created) withRequestId(created, () => handle.set({ [REQUEST_ID_ATTRIBUTE]: created }));
      }
      return result;
    });
  return requestId ? withRequestId(requestId, span) : span();
}

function isDecision(value: unknown): value is Decision {
  return typeof value === 'object' && value !== null && 'ok' in value;
}

/** The request's id, or a verification link's (`requestId` of its claims). */
function idOf(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { id, requestId } = value as { id?: unknown; requestId?: unknown };
  if (typeof id === 'string') return id;
  return typeof requestId === 'string' ? requestId : undefined;
}

/** The tracing configuration with the outbound proxy the exporter goes through. */
function withProxy(config: TracingConfig | undefined, proxy: ProxyEnv): TracingConfig | undefined {
  return config && { ...config, proxy: { ...proxy } };
}
