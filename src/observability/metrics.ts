import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/**
 * Label values come from closed sets only (docs/operations.md#metrics): a value from outside (a word someone typed, an error code
 * Slack sent, a status the API answered) is kept only when it is one of `allowed`, else it becomes `other`. So the
 * number of series is bounded by the code, and nothing a user types reaches `/metrics`.
 */
export function closedLabel(value: string, allowed: ReadonlySet<string>): string {
  return allowed.has(value) ? value : OTHER;
}

/** The one label value that stands for everything outside a closed set. */
export const OTHER = 'other';

/** Slack Web API errors counted by name; any other error code is counted as `other`. */
export const SLACK_ERROR_LABELS: ReadonlySet<string> = new Set([
  // Failures without a Slack error code (slack-api/errors.ts): no answer, the common HTTP statuses.
  'ECONNREFUSED',
  'ECONNRESET',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'TimeoutError',
  'UND_ERR_SOCKET',
  'invalid_response',
  'http_500',
  'http_502',
  'http_503',
  'http_504',
  // Platform errors the bot handles or that an operator acts on.
  'internal_error',
  'fatal_error',
  'service_unavailable',
  'request_timeout',
  'ratelimited',
  'invalid_blocks',
  'msg_too_long',
  'channel_not_found',
  'not_in_channel',
  'is_archived',
  'message_not_found',
  'cant_update_message',
  'edit_window_closed',
  'missing_scope',
  'not_authed',
  'invalid_auth',
  'account_inactive',
  'token_revoked',
  'token_expired',
  'user_not_found',
  'no_permission',
]);

/** An HTTP status as a label: the three digits of a real status (100-599), else `other`. */
export function statusLabel(status: number | undefined): string {
  if (status === undefined) return 'none';
  return Number.isInteger(status) && status >= 100 && status <= 599 ? String(status) : OTHER;
}

/** The bot's Prometheus metrics, one registry per process (tests create their own). */
export interface Metrics {
  registry: Registry;
  /** `/cloud <word>` commands received; the word is one the bot knows, `error` or `other` (see closedLabel). */
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
  /** Spans lost on the way to the collector: the bounded queue was full, or their export failed. */
  traceSpansDropped: Counter<'reason'>;
  /** 1 when the last check of the cloud API passed (reachable, key accepted), else 0 (src/startup/cloud-check.ts). */
  cloudApiUp: Gauge;
  /** MCP tool calls by agent (a name from the policy), tool (the closed set of tools) and outcome (ok, refused, error). */
  mcpToolCalls: Counter<'agent' | 'tool' | 'outcome'>;
  /** Audit entries not shipped to AUDIT_WEBHOOK_URL yet (src/audit-export/); refreshed by the process that ships. */
  auditExportBacklog: Gauge;
  /** Audit batches POSTed to AUDIT_WEBHOOK_URL, by outcome (shipped, failed). */
  auditExportBatches: Counter<'outcome'>;
  auditExportEntries: Counter<'outcome'>;
}

/** Creates the metrics in a fresh registry, with Node's default process metrics. */
export function createMetrics(options: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  // Tests that make many registries can skip the process metrics (each set starts an event-loop monitor).
  if (options.defaultMetrics !== false) collectDefaultMetrics({ register: registry });
  return { registry, ...requestMetrics(registry), ...surroundingsMetrics(registry) };
}

/** The requests and the work behind them: commands, states, decisions, jobs, the API's latency, the queues. */
function requestMetrics(registry: Registry) {
  return {
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
      help: 'Approval decisions (counted, approved, rejected, refused_click, verification_sent)',
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
  };
}

/** What the bot talks to besides: Slack's errors, the trace collector, the cloud API's health, the agents, the audit receiver. */
function surroundingsMetrics(registry: Registry) {
  return {
    slackErrors: new Counter({
      name: 'cloudops_slack_api_errors_total',
      help: 'Failed Slack Web API calls, by method and error',
      labelNames: ['method', 'error'],
      registers: [registry],
    }),
    traceSpansDropped: new Counter({
      name: 'cloudops_trace_spans_dropped_total',
      help: 'Spans not delivered to the trace collector, by reason (queue_full, export_failed)',
      labelNames: ['reason'],
      registers: [registry],
    }),
    cloudApiUp: new Gauge({
      name: 'cloudops_cloud_api_up',
      help: 'Whether the last check of the cloud API passed: reachable and the API key accepted (1) or not (0)',
      registers: [registry],
    }),
    mcpToolCalls: new Counter({
      name: 'cloudops_mcp_tool_calls_total',
      help: 'MCP tool calls, by agent of the policy, tool and outcome (ok, refused, error)',
      labelNames: ['agent', 'tool', 'outcome'],
      registers: [registry],
    }),
    auditExportBacklog: new Gauge({
      name: 'cloudops_audit_export_backlog',
      help: 'Audit entries not yet shipped to AUDIT_WEBHOOK_URL (read and not acknowledged, or not read)',
      registers: [registry],
    }),
    auditExportBatches: new Counter({
      name: 'cloudops_audit_export_batches_total',
      help: 'Audit batches POSTed to AUDIT_WEBHOOK_URL, by outcome (shipped: answered 2xx; too_large: 413, split; failed)',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    auditExportEntries: new Counter({
      name: 'cloudops_audit_export_entries_total',
      help: 'Audit entries the receiver refused as too large alone (413), by outcome (trimmed: shipped with details cut; set_aside: not shipped, kept in the audit log)',
      labelNames: ['outcome'],
      registers: [registry],
    }),
  };
}
