import { readFile } from 'node:fs/promises';
import { LineCounter, parseDocument } from 'yaml';
import type { Env } from './env.ts';
import type { Policy } from './policy.ts';
import { fieldOf, lineOf } from './policy-problems.ts';

type Path = (string | number)[];

const URL_OF = { jira: 'JIRA_URL', servicenow: 'SERVICENOW_URL' } as const;

/** The first `change_ticket` whose system the environment does not configure (its URL unset), with its path. */
export function unmetTicketSystem(
  env: Pick<Env, 'JIRA_URL' | 'SERVICENOW_URL'>,
  policy: Policy,
): { path: Path; words: string } | undefined {
  const rules: { path: Path; system: 'jira' | 'servicenow' }[] = [
    ...(policy.change_ticket
      ? [{ path: ['change_ticket', 'system'], system: policy.change_ticket.system }]
      : []),
    ...policy.projects.flatMap((p, i) =>
      p.change_ticket
        ? [{ path: ['projects', i, 'change_ticket', 'system'], system: p.change_ticket.system }]
        : [],
    ),
  ];
  const unmet = rules.find((r) => !env[URL_OF[r.system]]);
  if (!unmet) return undefined;
  return {
    path: unmet.path,
    words: `${unmet.system} needs ${URL_OF[unmet.system]} and its credentials (docs/configuration.md#change-tickets), which are not set: no ticket could be checked`,
  };
}

/** {@link unmetTicketSystem} as the one line start-up stops with: `policy.yml:12: change_ticket.system: …`. */
export async function unmetTicketLine(env: Env, policy: Policy, file: string): Promise<string | undefined> {
  const unmet = unmetTicketSystem(env, policy);
  if (!unmet) return undefined;
  let line: number | undefined;
  try {
    const lines = new LineCounter();
    const doc = parseDocument(await readFile(file, 'utf8'), { lineCounter: lines });
    line = lineOf(doc, lines, unmet.path);
  } catch {
    line = undefined;
  }
  return `${file}${line === undefined ? '' : `:${line}`}: ${fieldOf(unmet.path)}: ${unmet.words}`;
}
