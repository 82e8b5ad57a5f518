#!/usr/bin/env node
// The licences of the runtime dependencies, read from package-lock.json (every entry not marked "dev": what
// `npm ci --omit=dev` installs), written to docs/licenses.md.
//   node scripts/licenses.mjs           rewrites docs/licenses.md
//   node scripts/licenses.mjs --check   exits 1 when a licence is not on the allowed list (one that could bind the
//                                       code of whoever runs or ships cloudops: GPL, AGPL, LGPL, SSPL, none, unknown)
//                                       or when docs/licenses.md is not what the lockfile gives (run without --check)
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');
const OUT = join(repo, 'docs', 'licenses.md');

/**
 * Licences that put no condition on the code of the user's own that runs beside them. MPL-2.0 is file-level: it
 * binds changes to the MPL files themselves (none are changed here), not the code that uses them.
 */
export const ALLOWED = new Set([
  '0BSD',
  'Apache-2.0',
  'BlueOak-1.0.0',
  'BSD-2-Clause',
  'BSD-3-Clause',
  'CC0-1.0',
  'CC-BY-4.0',
  'ISC',
  'MIT',
  'MIT-0',
  'MPL-2.0',
  'Python-2.0',
  'Unlicense',
  'Zlib',
]);

/** Whether an SPDX expression is acceptable: `A OR B` needs one side allowed, `A AND B` both; parentheses allowed. */
export function allowed(expression) {
  if (typeof expression !== 'string' || expression.trim() === '') return false;
  const text = expression.trim();
  const inner = /^\((.*)\)$/.exec(text);
  if (inner && balanced(inner[1])) return allowed(inner[1]);
  for (const [operator, combine] of [
    [' OR ', (parts) => parts.some(allowed)],
    [' AND ', (parts) => parts.every(allowed)],
  ]) {
    const parts = splitTop(text, operator);
    if (parts.length > 1) return combine(parts);
  }
  return ALLOWED.has(text);
}

function balanced(text) {
  let depth = 0;
  for (const ch of text) {
    depth += ch === '(' ? 1 : ch === ')' ? -1 : 0;
    if (depth < 0) return false;
  }
  return depth === 0;
}

/** `text` split on `operator` outside parentheses. */
function splitTop(text, operator) {
  const parts = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i += 1) {
    if (text[i] === '(') depth += 1;
    else if (text[i] === ')') depth -= 1;
    else if (depth === 0 && text.startsWith(operator, i)) {
      parts.push(text.slice(start, i));
      start = i + operator.length;
    }
  }
  parts.push(text.slice(start));
  return parts;
}

/** The runtime packages in `lock` (a package-lock.json v2/v3), sorted by name then version. */
export function runtimePackages(lock) {
  const seen = new Map();
  for (const [path, entry] of Object.entries(lock.packages ?? {})) {
    if (path === '' || entry.dev || entry.link) continue;
    const name = entry.name ?? path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);
    const key = `${name}@${entry.version}`;
    if (!seen.has(key))
      seen.set(key, {
        name,
        version: entry.version ?? '',
        license: typeof entry.license === 'string' ? entry.license : '',
        optional: Boolean(entry.optional),
      });
  }
  return [...seen.values()].sort(
    (a, b) => a.name.localeCompare(b.name) || a.version.localeCompare(b.version),
  );
}

/** docs/licenses.md for `packages`. */
export function render(packages) {
  const counts = new Map();
  for (const p of packages) counts.set(p.license || '(none)', (counts.get(p.license || '(none)') ?? 0) + 1);
  const lines = [
    '# Licences of the runtime dependencies',
    '',
    'Generated from `package-lock.json` by `node scripts/licenses.mjs`; `npm test` runs it with `--check`, which',
    'fails when this file is stale or a licence is not on its allowed list (none here binds the code of whoever',
    'runs or ships cloudops). Development-only packages (tests, linters, the compiler) are not shipped and not listed.',
    'Packages marked "optional" are native builds of which npm installs only the one for the platform.',
    '',
    `${packages.length} packages:`,
    '',
    '| licence | packages |',
    '|---|---|',
    ...[...counts.entries()]
      .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
      .map(([l, n]) => `| ${l} | ${n} |`),
    '',
    '| package | version | licence |',
    '|---|---|---|',
    ...packages.map(
      (p) => `| ${p.name}${p.optional ? ' (optional)' : ''} | ${p.version} | ${p.license || '(none)'} |`,
    ),
    '',
  ];
  return lines.join('\n');
}

/** Problems for `--check`: each refused licence, and a stale list. */
export function check(packages, written) {
  const problems = packages
    .filter((p) => !allowed(p.license))
    .map((p) => `${p.name}@${p.version}: licence ${p.license || '(none given)'} is not on the allowed list`);
  if (written !== render(packages))
    problems.push('docs/licenses.md is stale: run `node scripts/licenses.mjs` and commit it');
  return problems;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const lock = JSON.parse(readFileSync(join(repo, 'package-lock.json'), 'utf8'));
  const packages = runtimePackages(lock);
  if (process.argv.includes('--check')) {
    let written = '';
    try {
      written = readFileSync(OUT, 'utf8');
    } catch {}
    const problems = check(packages, written);
    for (const problem of problems) process.stderr.write(`licences: ${problem}\n`);
    if (problems.length > 0) process.exit(1);
    process.stdout.write(
      `licences: ${packages.length} runtime packages, every licence allowed, list current\n`,
    );
  } else {
    writeFileSync(OUT, render(packages));
    process.stdout.write(`wrote docs/licenses.md (${packages.length} packages)\n`);
  }
}
