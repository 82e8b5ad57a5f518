import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// A clone must run its tests, demo and stand-ins with nothing beside it (issue 16 item 0). `.ci/run` runs the
// whole suite in a fresh clone in an empty temp dir; this file fails fast, in every `npm test`, when code
// reaches out of the repository again.
const repo = fileURLToPath(new URL('../../', import.meta.url));
const CODE_DIRS = ['src', 'sim', 'test', 'bench', 'bin', '.ci'];
const TOP_FILES = ['package.json', 'Dockerfile', 'docker-compose.yml', 'vitest.config.ts', 'tsconfig.json'];

/** Every file under `dir`, recursively. */
function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    return entry.isDirectory() ? files(path) : [path];
  });
}

const code = [...CODE_DIRS.flatMap((dir) => files(join(repo, dir))), ...TOP_FILES.map((f) => join(repo, f))]
  .filter((path) => /\.(ts|mts|mjs|js|json|yml)$|(^|\/)(run|Dockerfile)$/.test(path))
  .map((path) => ({ path, rel: relative(repo, path), text: readFileSync(path, 'utf8') }));

const inside = (path: string) =>
  path === repo.replace(/\/$/, '') || path.startsWith(repo.endsWith(sep) ? repo : repo + sep);

describe('the repository is self-contained', () => {
  it('no code, test, bench or build file names the shared team folder', () => {
    const offenders = code
      .filter(({ rel }) => rel !== relative(repo, fileURLToPath(import.meta.url)))
      .filter(({ text }) =>
        /\.\.\/shared\b|['"]shared['"]\s*,\s*['"](slack-reference|cloud-api-spec)/.test(text),
      )
      .map(({ rel }) => rel);
    expect(offenders).toEqual([]);
  });

  it('every path built from import.meta.url stays inside the repository', () => {
    const escaping: string[] = [];
    for (const { path, rel, text } of code) {
      const here = dirname(path);
      for (const match of text.matchAll(/new URL\(\s*['"`]([^'"`$]+)['"`]\s*,\s*import\.meta\.url\s*\)/g)) {
        if (!inside(resolve(here, match[1]!))) escaping.push(`${rel}: ${match[1]}`);
      }
      const joined = /join\(\s*dirname\(fileURLToPath\(import\.meta\.url\)\)((?:\s*,\s*'[^']*')+),?\s*\)/g;
      for (const match of text.matchAll(joined)) {
        const parts = [...match[1]!.matchAll(/'([^']*)'/g)].map((part) => part[1]!);
        if (!inside(resolve(here, ...parts))) escaping.push(`${rel}: ${parts.join('/')}`);
      }
    }
    expect(escaping).toEqual([]);
  });

  it('keeps the Slack reference files with a licence for each upstream and the API description', () => {
    const reference = join(repo, 'vendor', 'slack-reference');
    const readme = readFileSync(join(reference, 'README.md'), 'utf8');
    const licences = [...readme.matchAll(/`(LICENSE-[\w-]+\.txt)`/g)].map((match) => match[1]!);
    expect(new Set(licences).size).toBe(3);
    for (const licence of licences)
      expect(readFileSync(join(reference, licence), 'utf8')).toMatch(/MIT License/);
    for (const method of [
      'chat.postMessage',
      'views.open',
      'conversations.replies',
      'apps.connections.open',
    ]) {
      expect(existsSync(join(reference, 'methods', `${method}.json`)), method).toBe(true);
    }
    expect(existsSync(join(reference, 'block-kit.schema.json'))).toBe(true);
    expect(readFileSync(join(repo, 'vendor', 'README.md'), 'utf8')).toContain('slack-reference/README.md');
    expect(readFileSync(join(repo, 'docs', 'cloud-api-spec.md'), 'utf8')).toMatch(
      /^# Public cloud service interface/,
    );
  });
});
