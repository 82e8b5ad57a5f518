import type { CommandWord } from '../deps.ts';
import { USAGE } from './parse.ts';

/** The built-in words' help lines; pricing adds its own through `CommandWord`. */
export const BUILT_IN_HELP: Pick<CommandWord, 'usage' | 'summary'>[] = [
  { usage: USAGE.resize, summary: 'change cores, RAM, disk, CPU class or networking (opens a form)' },
  { usage: USAGE.restore, summary: 'restore a VM from a backup (opens a form)' },
  { usage: USAGE.jobs, summary: 'this channel’s recent requests and who acted' },
  { usage: USAGE.help, summary: 'this help' },
];

/** Usage text listing only the words that work in this deployment. */
export function helpText(words: Pick<CommandWord, 'usage' | 'summary'>[]): string {
  const lines = [...BUILT_IN_HELP.slice(0, 3), ...words, ...BUILT_IN_HELP.slice(3)].map(
    (w) => `• ${w.usage}: ${w.summary}`,
  );
  return `*cloudops* runs cloud changes with the documented rules checked first and a second person’s approval.\n${lines.join('\n')}`;
}
