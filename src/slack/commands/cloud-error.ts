import { cloudReason } from '../../cloud/errors.ts';

/** One sentence for a person when the cloud API could not be read; never a dump. */
export function cloudErrorText(error: unknown): string {
  return `:warning: The cloud API could not be read (${cloudReason(error)}). Please try again in a minute.`;
}
