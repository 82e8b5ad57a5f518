import type { Env } from '../config/env.ts';

/** What a command may touch: the environment, its output streams and a clock. Tests and `main()` pass them in. */
export interface CliIo {
  env: Env;
  /** Whether POLICY_FILE was set explicitly (a missing default file is then not an error for `clusters`). */
  policyFileSet: boolean;
  stdout: NodeJS.WritableStream;
  now: () => Date;
  /**
   * `cloudops mcp` only: CLOUDOPS_URL, CLOUDOPS_AGENT_TOKEN (a secret, kept out of `env`), and the names of the
   * bot's own variables that are set and ignored.
   */
  mcp?: { url: string | undefined; token: string | undefined; ignored: string[] };
}

/** A problem to report as one line on stderr; `exitCode` says which kind (1 runtime, 2 usage). */
export class CliError extends Error {
  override readonly name = 'CliError';
  readonly code: string = 'CLI_FAILED';
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}

/** A usage mistake: exit code 2. */
export class UsageError extends CliError {
  override readonly code: string = 'CLI_USAGE';
  constructor(message: string) {
    super(message, 2);
  }
}

/** Writes text and waits until the stream took it, so the process never exits with output pending. */
export async function write(out: NodeJS.WritableStream, text: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    out.write(text, (error) => (error ? reject(error) : resolve()));
  });
}

/** Fixed-width columns for a human table. */
export function table(rows: string[][]): string {
  const widths: number[] = [];
  for (const row of rows) {
    for (const [i, cell] of row.entries()) widths[i] = Math.max(widths[i] ?? 0, cell.length);
  }
  return rows
    .map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}
