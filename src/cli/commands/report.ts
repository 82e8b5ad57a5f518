import { CliError, type CliIo } from '../io.ts';

/** `cloudops report`: see docs/operations.md#report. */
export async function reportCommand(_io: CliIo, _values: Record<string, unknown>): Promise<number> {
  throw new CliError('report: not yet');
}
