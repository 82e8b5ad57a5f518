import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/** The bot's Prometheus metrics, one registry per process (tests create their own). */
export interface Metrics {
  registry: Registry;
  /** `/cloud <word>` commands received. */
  commands: Counter<'word'>;
  /** Requests entering a state, by kind. */
  requests: Counter<'kind' | 'state'>;
  /** Approval decisions and refused clicks. */
  approvals: Counter<'decision'>;
  /** Jobs finished, by queue and outcome. */
  jobs: Counter<'queue' | 'outcome'>;
  /** Cloud API call latency by operation and HTTP status ('none' when no answer came). */
  apiLatency: Histogram<'operation' | 'status' | 'outcome'>;
  /** Jobs waiting, by queue; refreshed when scraped. */
  queueDepth: Gauge<'queue'>;
  /** Failed Slack Web API calls, by method and error. */
  slackErrors: Counter<'method' | 'error'>;
}

/** Creates the metrics in a fresh registry, with Node's default process metrics. */
export function createMetrics(options: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  // Tests that make many registries can skip the process metrics (each set starts an event-loop monitor).
  if (options.defaultMetrics !== false) collectDefaultMetrics({ register: registry });
  return {
    registry,
    commands: new Counter({
      name: 'cloudops_commands_total',
      help: '/cloud commands received, by first word',
      labelNames: ['word'],
      registers: [registry],
    }),
    requests: new Counter({
      name: 'cloudops_requests_total',
      help: 'Requests entering a state, by kind and state',
      labelNames: ['kind', 'state'],
      registers: [registry],
    }),
    approvals: new Counter({
      name: 'cloudops_approvals_total',
      help: 'Approval decisions (approved, rejected, refused_click)',
      labelNames: ['decision'],
      registers: [registry],
    }),
    jobs: new Counter({
      name: 'cloudops_jobs_total',
      help: 'Jobs finished, by queue and outcome',
      labelNames: ['queue', 'outcome'],
      registers: [registry],
    }),
    apiLatency: new Histogram({
      name: 'cloudops_cloud_api_seconds',
      help: 'Cloud API call latency, by operation, HTTP status and outcome',
      labelNames: ['operation', 'status', 'outcome'],
      buckets: [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    queueDepth: new Gauge({
      name: 'cloudops_queue_depth',
      help: 'Jobs waiting or delayed, by queue',
      labelNames: ['queue'],
      registers: [registry],
    }),
    slackErrors: new Counter({
      name: 'cloudops_slack_api_errors_total',
      help: 'Failed Slack Web API calls, by method and error',
      labelNames: ['method', 'error'],
      registers: [registry],
    }),
  };
}
