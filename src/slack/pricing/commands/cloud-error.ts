import { CloudApiError } from '../../../cloud/errors.ts';

/** One sentence for a person when the cloud API could not be read; never a dump. */
export function cloudErrorText(error: unknown): string {
  const reason = error instanceof CloudApiError ? error.reason.replace(/[.\s]+$/, '') : 'unexpected error';
  return `:warning: The cloud API could not be read (${reason}). Please try again in a minute.`;
}
