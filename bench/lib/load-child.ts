import { Pool } from 'undici';
import type { LoadJob, LoadResult } from './load-protocol.ts';
import { buttonClick, type SignedRequest, sign, slashCommand } from './slack-request.ts';

/**
 * The load generator's own process (forked by load-generator.ts), so the bot's event loop in the bench process
 * does not delay the client's timers or reads, and the client can use the other core.
 */
const pools = new Map<string, Pool>();

function poolFor(url: URL, connections: number): Pool {
  const key = `${url.origin}#${connections}`;
  let pool = pools.get(key);
  if (!pool) {
    pool = new Pool(url.origin, { connections, pipelining: 1, keepAliveTimeout: 30_000 });
    pools.set(key, pool);
  }
  return pool;
}

function build(job: LoadJob, index: number): SignedRequest {
  if (job.kind.type === 'command') return slashCommand(job.secret, job.who, job.kind.text);
  if (job.kind.type === 'form') {
    const body = job.kind.bodies[index];
    if (body === undefined)
      throw new Error(`load job ${job.id}: only ${job.kind.bodies.length} bodies for request ${index + 1}`);
    return sign(job.secret, body);
  }
  const value = job.kind.values[index];
  if (value === undefined)
    throw new Error(
      `load job ${job.id}: only ${job.kind.values.length} action values for request ${index + 1}`,
    );
  return buttonClick(job.secret, job.who, job.kind.actionId, value);
}

async function run(job: LoadJob): Promise<LoadResult> {
  const url = new URL(job.url);
  const pool = poolFor(url, job.connections);
  const total =
    job.shape.type === 'burst'
      ? job.shape.count
      : Math.round((job.shape.perSecond * job.shape.durationMs) / 1000);
  const intervalMs = job.shape.type === 'rate' ? 1000 / job.shape.perSecond : 0;
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let errors = 0;
  let firstError: string | undefined;
  let maxSendLagMs = 0;
  const sentAtMs: number[] = [];
  const inFlight: Promise<void>[] = [];

  const send = (index: number, plannedAt: number) => {
    const request = build(job, index);
    const sentAt = performance.now();
    sentAtMs[index] = performance.timeOrigin + sentAt;
    maxSendLagMs = Math.max(maxSendLagMs, sentAt - plannedAt);
    inFlight.push(
      pool
        .request({
          method: 'POST',
          path: url.pathname,
          headers: request.headers,
          body: request.body,
          headersTimeout: job.timeoutMs,
          bodyTimeout: job.timeoutMs,
        })
        .then(async (response) => {
          await response.body.text();
          const latency = performance.now() - sentAt;
          statuses[response.statusCode] = (statuses[response.statusCode] ?? 0) + 1;
          if (response.statusCode === 200) latencies.push(latency);
          else {
            errors++;
            firstError ??= `HTTP ${response.statusCode}`;
          }
        })
        .catch((error: Error & { code?: string }) => {
          errors++;
          statuses[error.code ?? 'error'] = (statuses[error.code ?? 'error'] ?? 0) + 1;
          firstError ??= `${error.code ?? error.name}: ${error.message}`;
        }),
    );
  };

  const start = performance.now();
  if (job.shape.type === 'burst') {
    for (let i = 0; i < total; i++) send(i, start);
  } else {
    // Send every request whose planned time has come, then sleep until the next one: no drift over the run.
    let next = 0;
    while (next < total) {
      const now = performance.now();
      while (next < total && start + next * intervalMs <= now) {
        send(next, start + next * intervalMs);
        next++;
      }
      if (next < total) {
        const wait = Math.max(0, start + next * intervalMs - performance.now());
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }
  await Promise.all(inFlight);
  return {
    id: job.id,
    latencies,
    errors,
    statuses,
    firstError,
    elapsedMs: performance.now() - start,
    maxSendLagMs,
    sentAtMs,
  };
}

process.on('message', (message: LoadJob | { type: 'close' }) => {
  if ('type' in message && message.type === 'close') {
    void Promise.all([...pools.values()].map((p) => p.close())).finally(() => process.exit(0));
    return;
  }
  const job = message as LoadJob;
  run(job).then(
    (result) => process.send?.(result),
    (error: Error) =>
      process.send?.({
        id: job.id,
        latencies: [],
        errors: 1,
        statuses: {},
        firstError: error.message,
        elapsedMs: 0,
        maxSendLagMs: 0,
        sentAtMs: [],
      } satisfies LoadResult),
  );
});
// The bench going away ends this process too.
process.on('disconnect', () => process.exit(0));
