import { type DestinationStream, type Logger, pino } from 'pino';

/** Paths pino removes from every line: anything that could carry a token, a key or a secret. */
export const REDACT_PATHS = [
  'token',
  'botToken',
  'appToken',
  'apiKey',
  'signingSecret',
  'password',
  'authorization',
  'Authorization',
  'cookie',
  'headers.authorization',
  'headers.Authorization',
  'headers.cookie',
  'req.headers.authorization',
  'req.headers.cookie',
  '*.token',
  '*.botToken',
  '*.appToken',
  '*.apiKey',
  '*.signingSecret',
  '*.password',
  '*.authorization',
  '*.Authorization',
  '*.headers.authorization',
  '*.headers.Authorization',
  '*.headers.cookie',
  'env.SLACK_BOT_TOKEN',
  'env.SLACK_APP_TOKEN',
  'env.SLACK_SIGNING_SECRET',
  'env.CLOUD_API_KEY',
  'env.OIDC_CLIENT_SECRET',
  'env.SEAL_KEY',
  'env.SEAL_KEY_PREVIOUS',
  'env.AUDIT_WEBHOOK_SECRET',
  'clientSecret',
  '*.clientSecret',
  'client_secret',
  '*.client_secret',
];

/**
 * Matches secrets that slip into free text: Slack tokens (bot, user, app, refresh, a workflow step's), agents'
 * tokens (`cloudops_agent_…`: the bot knows only their hashes, so they are caught by shape), bearer credentials, and
 * the ticket of a Socket Mode URL (`wss://…/link/?ticket=…`: whoever has it can take the app's events), and the
 * token of a verification or registration link (`/verify/…`, `/passkeys/…`: the Slack client logs the message that
 * carries it at debug, and whoever has it can verify in the approver's place).
 */
const SECRET_IN_TEXT =
  /\b(xox[a-z]-[A-Za-z0-9-]+|xapp-[A-Za-z0-9-]+|xwfp-[A-Za-z0-9-]+)|(cloudops_agent_[A-Za-z0-9_-]+)|(Bearer\s+|\bticket=)[^\s"'\\,;&]+|(\/(?:verify|passkeys)\/)[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])/gi;

/** Secrets shorter than this are not scrubbed as literals: they would blank out ordinary words. */
const MIN_SECRET_LENGTH = 6;

/** Replaces Slack tokens, agents' tokens, bearer credentials and the given literal secrets in a string. */
export function scrubSecrets(text: string, secrets: readonly string[] = []): string {
  let out = text.replace(
    SECRET_IN_TEXT,
    (
      _m,
      token: string | undefined,
      agentToken: string | undefined,
      lead: string | undefined,
      linkPath: string | undefined,
    ) => (token || agentToken ? '[redacted]' : `${lead ?? linkPath}[redacted]`),
  );
  for (const secret of secrets) {
    // Looked for first: every audit entry and log line passes here, and splitting allocates even when it finds none.
    if (secret.length >= MIN_SECRET_LENGTH && out.includes(secret))
      out = out.split(secret).join('[redacted]');
  }
  return out.replace(URL_PASSWORD, '$1[redacted]@');
}

/** The password of a URL written out (`scheme://user:password@host`): the user and host are kept, for context. */
const URL_PASSWORD = /(\b[a-z][a-z0-9+.-]*:\/\/[^\s:@/?#]*:)[^\s@/?#]+@/gi;

/** How deep `cause` chains are followed in a logged error. */
const MAX_CAUSE_DEPTH = 3;

/**
 * An error as a log field: name, message, code, status, stack and cause, with secrets scrubbed. Anything else
 * an error carries (a Slack error's `headers` and `body`, an HTTP client's request options) is left out.
 */
export function serializeError(err: unknown, secrets: readonly string[] = [], depth = 0): unknown {
  if (!(err instanceof Error)) return typeof err === 'string' ? scrubSecrets(err, secrets) : err;
  const fields = err as Error & {
    code?: unknown;
    status?: unknown;
    statusCode?: unknown;
    retryAfter?: unknown;
  };
  return {
    type: err.name,
    message: scrubSecrets(err.message, secrets),
    code: fields.code,
    status: fields.status ?? fields.statusCode,
    retryAfter: fields.retryAfter,
    stack: err.stack ? scrubSecrets(err.stack, secrets) : undefined,
    cause:
      err.cause !== undefined && depth < MAX_CAUSE_DEPTH
        ? serializeError(err.cause, secrets, depth + 1)
        : undefined,
  };
}

/**
 * Wraps a destination so each finished line is scrubbed once more: a secret nested where no redact path
 * reaches (a URL, a library's message, a child logger's bindings) is caught here. Literal secrets are matched
 * both as written and as JSON escapes them.
 */
export function scrubbingStream(
  destination: DestinationStream,
  secrets: readonly string[],
): DestinationStream {
  const literals = secrets.flatMap((secret) => [secret, JSON.stringify(secret).slice(1, -1)]);
  const unique = [...new Set(literals)];
  return { write: (line: string) => destination.write(scrubSecrets(line, unique)) };
}

/**
 * The process logger: JSON lines with secrets redacted by path, errors serialized without their transport
 * details, and every line scrubbed of Slack tokens, bearer credentials and the configured secret values.
 * Per-request and per-job lines come from child loggers: `logger.child({ requestId, jobId })`.
 */
export function createLogger(
  options: {
    level?: string;
    secrets?: readonly string[];
    name?: string;
    /** Fields added to every line: the current span's `trace_id` and `span_id` when tracing is on (unset when off). */
    traceFields?: () => Record<string, string>;
  } = {},
  destination: DestinationStream = pino.destination(1),
): Logger {
  const secrets = (options.secrets ?? []).filter((s) => s.length >= MIN_SECRET_LENGTH);
  return pino(
    {
      name: options.name ?? 'cloudops',
      level: options.level ?? 'info',
      mixin: options.traceFields,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      // "level":"warn" rather than 40: read by people and log tools alike; the rest of the line stays pino's.
      formatters: { level: (label) => ({ level: label }) },
      serializers: {
        err: (err: unknown) => serializeError(err, secrets),
        error: (err: unknown) => serializeError(err, secrets),
      },
    },
    scrubbingStream(destination, secrets),
  );
}

export type { Logger };
