import { CloudApiError } from '../../../cloud/errors.ts';

/**
 * The client's reason as a clause for "could not be read (…)": no final stop, and without the "nothing was
 * applied" tail that only matters for changes.
 */
export function cloudReason(error: unknown): string {
  if (!(error instanceof CloudApiError)) return 'unexpected error';
  const reason = error.reason.replace(/;?\s*nothing was applied\.?$/i, '').replace(/[.\s]+$/, '');
  return reason.charAt(0).toLowerCase() + reason.slice(1);
}

/** One sentence for a person when the cloud API could not be read; never a dump. */
export function cloudErrorText(error: unknown): string {
  return `:warning: The cloud API could not be read (${cloudReason(error)}). Please try again in a minute.`;
}
