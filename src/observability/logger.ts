import { type DestinationStream, type Logger, pino } from 'pino';

/** Paths pino removes from every line: anything that could carry a token, a key or a secret. */
export const REDACT_PATHS = [
  'token',
  'botToken',
  'appToken',
  'apiKey',
  'signingSecret',
  'authorization',
  'Authorization',
  'headers.authorization',
  'headers.Authorization',
  'req.headers.authorization',
  'req.headers.cookie',
  '*.token',
  '*.apiKey',
  '*.authorization',
  '*.Authorization',
  'env.SLACK_BOT_TOKEN',
  'env.SLACK_APP_TOKEN',
  'env.SLACK_SIGNING_SECRET',
  'env.CLOUD_API_KEY',
];

/** Matches secrets that slip into free text: Slack tokens and bearer credentials. */
const SECRET_IN_TEXT = /\b(xox[abposr]-[A-Za-z0-9-]+|xapp-[A-Za-z0-9-]+)|(Bearer\s+)[^\s"']+/g;

/** Replaces Slack tokens, bearer credentials and the given literal secrets in a string. */
export function scrubSecrets(text: string, secrets: readonly string[] = []): string {
  let out = text.replace(SECRET_IN_TEXT, (_m, token: string | undefined, bearer: string | undefined) =>
    token ? '[redacted]' : `${bearer}[redacted]`,
  );
  for (const secret of secrets) {
    if (secret.length >= 6) out = out.split(secret).join('[redacted]');
  }
  return out;
}

/**
 * The process logger: JSON lines, secrets redacted by path, and the configured secret values scrubbed from
 * messages too, since an error message from a library can quote a header.
 */
export function createLogger(
  options: { level?: string; secrets?: readonly string[]; name?: string } = {},
  destination?: DestinationStream,
): Logger {
  const secrets = (options.secrets ?? []).filter((s) => s.length >= 6);
  return pino(
    {
      name: options.name ?? 'cloudops',
      level: options.level ?? 'info',
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      hooks: {
        logMethod(args, method) {
          const scrubbed = args.map((arg) =>
            typeof arg === 'string'
              ? scrubSecrets(arg, secrets)
              : arg instanceof Error
                ? { err: { type: arg.name, message: scrubSecrets(arg.message, secrets), code: (arg as { code?: unknown }).code } }
                : arg,
          );
          method.apply(this, scrubbed as Parameters<typeof method>);
        },
      },
      serializers: {
        err: (err: unknown) => {
          if (!(err instanceof Error)) return err;
          return {
            type: err.name,
            message: scrubSecrets(err.message, secrets),
            code: (err as { code?: unknown }).code,
            stack: err.stack ? scrubSecrets(err.stack, secrets) : undefined,
          };
        },
      },
    },
    destination,
  );
}

export type { Logger };
