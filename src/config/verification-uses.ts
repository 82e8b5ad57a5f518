import { readFile } from 'node:fs/promises';
import { LineCounter, parseDocument } from 'yaml';
import type { Env } from './env.ts';
import type { Policy } from './policy.ts';
import { fieldOf, lineOf } from './policy-problems.ts';
import type { VerifyMethod } from './verification-policy.ts';

/*
 * Where the policy asks for verified approvals, and what the environment lacks for them (PUBLIC_URL, SSO settings):
 * read over the whole policy, so above policy.ts, where verification-policy.ts (the names and the schema) is below it.
 */

/** One `verify:` of the policy: where it stands and what it names. */
export interface VerifyUse {
  path: (string | number)[];
  methods: VerifyMethod[];
}

/** Every `verify:` of the policy, in file order of its sections: approvals blocks, their rules, agents. */
export function verifyUses(policy: Policy): VerifyUse[] {
  const uses: VerifyUse[] = [];
  const block = (approvals: Policy['approvals'], base: (string | number)[]) => {
    if (!approvals) return;
    if (approvals.verify) uses.push({ path: [...base, 'verify'], methods: approvals.verify });
    approvals.rules.forEach((rule, r) => {
      if (rule.verify) uses.push({ path: [...base, 'rules', r, 'verify'], methods: rule.verify });
    });
  };
  block(policy.approvals, ['approvals']);
  policy.projects.forEach((project, p) => {
    block(project.approvals, ['projects', p, 'approvals']);
  });
  policy.agents.forEach((agent, a) => {
    if (agent.verify) uses.push({ path: ['agents', a, 'verify'], methods: agent.verify });
  });
  return uses;
}

/** The environment variables each method needs to run the verification page. */
const NEEDS: Record<VerifyMethod, (keyof Env)[]> = {
  passkey: ['PUBLIC_URL'],
  sso: ['PUBLIC_URL', 'OIDC_ISSUER', 'OIDC_CLIENT_ID', 'OIDC_CLIENT_SECRET'],
};

/** What a `verify:` lacks: the field, the method and the variables that are not set. */
export interface VerifyUnmet extends VerifyUse {
  method: VerifyMethod;
  missing: (keyof Env)[];
}

/**
 * The first `verify:` whose methods the environment cannot serve (each method listed must be served: the page offers
 * every one the rule names), or undefined when all can be.
 */
export function unmetVerify(env: Env, policy: Policy): VerifyUnmet | undefined {
  for (const use of verifyUses(policy)) {
    for (const m of use.methods) {
      const missing = NEEDS[m].filter((name) => env[name] === undefined);
      if (missing.length > 0) return { ...use, method: m, missing };
    }
  }
  return undefined;
}

const list = (names: string[]) =>
  names.length <= 1 ? names.join('') : `${names.slice(0, -1).join(', ')} and ${names.at(-1)}`;

/** `sso needs OIDC_ISSUER and OIDC_CLIENT_SECRET (the SSO login), which are not set; …`: the unmet need in words. */
export function unmetWords(unmet: VerifyUnmet): string {
  const what = unmet.method === 'sso' ? 'the SSO login' : 'the passkey page';
  return `${unmet.method} needs ${list(unmet.missing)} (${what}), which ${unmet.missing.length === 1 ? 'is' : 'are'} not set; set ${unmet.missing.length === 1 ? 'it' : 'them'} or remove the verify (docs/policy.md#verified-approvals)`;
}

/**
 * The one start-up line for a `verify:` the environment cannot serve, naming the file, line and field of the rule
 * and the variables it needs; undefined when every `verify:` can be served. The file is read again only to find the
 * line, on this error path alone.
 */
export async function unmetVerifyLine(env: Env, policy: Policy, file: string): Promise<string | undefined> {
  const unmet = unmetVerify(env, policy);
  if (!unmet) return undefined;
  let line: number | undefined;
  try {
    const lines = new LineCounter();
    const doc = parseDocument(await readFile(file, 'utf8'), { lineCounter: lines });
    line = lineOf(doc, lines, unmet.path);
  } catch {
    // The policy was read moments ago; without its text the line is left out, the field still names the rule.
    line = undefined;
  }
  return `${file}${line === undefined ? '' : `:${line}`}: ${fieldOf(unmet.path)}: ${unmetWords(unmet)}`;
}
