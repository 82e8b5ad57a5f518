import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseEnv } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadEnv } from '../../src/config/env.ts';
import { TRACING_ENV_SHAPE } from '../../src/config/tracing-env.ts';

// The repository documents itself: a short README, the reference in docs/, .env.example and the changelog, with
// every link and every cited heading (`docs/operations.md#shutdown` in a comment) resolving inside it.
const repo = fileURLToPath(new URL('../../', import.meta.url));
const read = (file: string) => readFileSync(join(repo, file), 'utf8');
const readme = read('README.md');

const PAGES = [
  'slack',
  'configuration',
  'policy',
  'requests',
  'operations',
  'performance',
  'troubleshooting',
  'architecture',
  'cloud-api-spec',
];
const markdown = [
  'README.md',
  'CHANGELOG.md',
  ...readdirSync(join(repo, 'docs'))
    .filter((file) => file.endsWith('.md'))
    .map((file) => `docs/${file}`),
];

/** Every variable the bot reads: the keys of the environment schema in src/config/env.ts. */
const envSource = read('src/config/env.ts');
const schema = envSource.slice(envSource.indexOf('const envSchema = z.object({'));
const VARIABLES = [
  ...[...schema.slice(0, schema.indexOf('\n});')).matchAll(/^ {2}([A-Z][A-Z0-9_]+):/gm)].map(
    (match) => match[1]!,
  ),
  // The standard OTEL_* variables, spread into the schema from src/config/tracing-env.ts.
  ...Object.keys(TRACING_ENV_SHAPE),
];

/** A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens. */
const anchor = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');

/** The anchors of a Markdown file's headings. */
const anchorsOf = (file: string) =>
  new Set([...read(file).matchAll(/^#{1,6} (.+)$/gm)].map((match) => anchor(match[1]!)));

describe('README.md', () => {
  it('is at most 250 lines', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(250);
  });

  it('starts people with the demo, and contributors with the tests', () => {
    expect(readme).toContain('npm ci && npm run demo');
    expect(readme).toContain('npm ci && npm test');
  });

  it('walks to a real workspace in Socket Mode: the manifest, both tokens, the policy, .env, a start', () => {
    const path = readme.slice(readme.indexOf('## Ten minutes to a real workspace'));
    for (const step of [
      'manifest.yml',
      'xoxb-',
      'xapp-',
      'connections:write',
      'policy.example.yml',
      '.env.example',
    ])
      expect(path, step).toContain(step);
    expect(path).toContain('docker compose up -d');
    expect(path).toContain('npm start');
  });

  it('links every page of docs/ and the changelog', () => {
    for (const page of PAGES) expect(readme, page).toContain(`](docs/${page}.md)`);
    expect(readme).toContain('](CHANGELOG.md)');
  });
});

describe('docs/', () => {
  it('configuration.md has a table row for every environment variable the bot reads', () => {
    expect(VARIABLES.length).toBeGreaterThan(15);
    // Variables with a default come back from loadEnv({}): the scan above must not miss one.
    for (const name of Object.keys(loadEnv({}))) expect(VARIABLES).toContain(name);
    const configuration = read('docs/configuration.md');
    for (const name of VARIABLES) expect(configuration).toMatch(new RegExp(`^\\| \`${name}\` \\|`, 'm'));
  });

  it('policy.md documents every key of policy.example.yml, top level and per project', () => {
    const example = parse(read('policy.example.yml')) as { projects: Record<string, unknown>[] };
    const rows = read('docs/policy.md')
      .split('\n')
      .filter((line) => line.startsWith('|'))
      .join('\n');
    for (const key of Object.keys(example)) expect(rows, key).toMatch(new RegExp(`\`${key}[\`.\\[]`));
    const projectKeys = new Set(example.projects.flatMap((project) => Object.keys(project)));
    for (const key of projectKeys) expect(rows, key).toMatch(new RegExp(`\`projects\\[\\]\\.${key}[\`\\[]`));
    expect(read('docs/policy.md')).toContain('policy.example.yml');
  });

  it('operations.md and troubleshooting.md keep the headings others fill in and link to', () => {
    const operations = anchorsOf('docs/operations.md');
    for (const heading of [
      'roles',
      'scaling',
      'redis-sentinel',
      'redis-cluster',
      'retention',
      'shutdown',
      'upgrades',
    ])
      expect(operations, heading).toContain(heading);
    expect(anchorsOf('docs/troubleshooting.md')).toContain('cloudops-doctor');
  });

  it('every relative link in the README, the changelog and docs/ reaches a file, and its heading', () => {
    const broken: string[] = [];
    for (const file of markdown) {
      for (const match of read(file).matchAll(/\]\(([^)\s]+)\)|<img src="([^"]+)"/g)) {
        const target = (match[1] ?? match[2])!;
        if (/^[a-z]+:/.test(target)) continue;
        const [path, hash] = target.split('#') as [string, string | undefined];
        const resolved = path === '' ? file : normalize(join(dirname(file), path));
        if (!existsSync(join(repo, resolved))) broken.push(`${file}: ${target} (no file)`);
        else if (hash && resolved.endsWith('.md') && !anchorsOf(resolved).has(hash))
          broken.push(`${file}: ${target} (no such heading)`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('every docs/<page>.md (and #<heading>) cited in a tracked file exists', () => {
    const files = execFileSync('git', ['ls-files', '-z'], { cwd: repo, encoding: 'utf8' })
      .split('\0')
      .filter((file) => /\.(ts|mts|mjs|js|yml|yaml|md|json)$/.test(file) && !file.startsWith('vendor/'));
    const cited: string[] = [];
    const missing: string[] = [];
    for (const file of files) {
      if (!existsSync(join(repo, file))) continue;
      for (const match of read(file).matchAll(/docs\/([a-z-]+\.md)(?:#([a-z0-9-]+))?/g)) {
        cited.push(match[0]);
        const page = `docs/${match[1]}`;
        const found =
          existsSync(join(repo, page)) && (match[2] === undefined || anchorsOf(page).has(match[2]));
        if (!found) missing.push(`${file}: ${match[0]}`);
      }
    }
    expect(cited.length).toBeGreaterThan(20);
    expect(missing).toEqual([]);
  });
});

describe('.env.example', () => {
  const example = parseEnv(read('.env.example'));

  it('names every variable the bot reads, each with a comment, no value filled in', () => {
    // REDIS_PASSWORD is docker-compose.yml's (its Redis' password), not the bot's.
    expect(read('docker-compose.yml')).toMatch(/\$\{REDIS_PASSWORD:\?/);
    expect(Object.keys(example).sort()).toEqual([...VARIABLES, 'REDIS_PASSWORD'].sort());
    expect(Object.values(example).every((value) => value === '')).toBe(true);
    const lines = read('.env.example').split('\n');
    for (const name of VARIABLES) {
      const at = lines.findIndex((line) => line.startsWith(`${name}=`));
      expect(lines[at - 1], name).toMatch(/^# /);
    }
  });

  it('copied as it is, it parses (empty values count as unset)', () => {
    expect(() => loadEnv(example)).not.toThrow();
  });
});

describe('CHANGELOG.md', () => {
  const { version } = JSON.parse(read('package.json')) as { version: string };
  const sections = read('CHANGELOG.md')
    .split(/^(?=## )/m)
    .slice(1)
    .map((text) => ({
      title: text.split('\n')[0]!.slice(3).trim(),
      body: text.split('\n').slice(1).join('\n').trim(),
    }));

  it('the package version is the top released section; above it only an empty Unreleased', () => {
    const released = sections.findIndex((s) => /^\d+\.\d+\.\d+ \(\d{4}-\d{2}-\d{2}\)$/.test(s.title));
    expect(sections[released]?.title.split(' ')[0]).toBe(version);
    for (const above of sections.slice(0, released)) {
      expect(above.title).toBe('Unreleased');
      expect(above.body, 'entries under Unreleased belong in the release being cut').toBe('');
    }
  });

  it('the released versions go down without a gap in minor versions, each dated', () => {
    const versions = sections.filter((s) => s.title !== 'Unreleased').map((s) => s.title.split(' ')[0]!);
    expect(versions).toEqual(['0.5.0', '0.4.0', '0.3.0', '0.2.0', '0.1.0']);
    expect(version).toBe(versions[0]);
  });

  it('the release says what an upgrade from the one before changes', () => {
    const top = sections.find((s) => s.title.startsWith(`${version} `))!;
    expect(top.body).toMatch(/^### Upgrading from 0\.4$/m);
    for (const needed of ['SEAL_KEY', 'REDIS_PASSWORD', 'Redis']) expect(top.body).toContain(needed);
  });

  it('the README names the same version, and so do the release artifacts', () => {
    expect(read('README.md')).toMatch(new RegExp(`\\bVersion ${version.replaceAll('.', '\\.')}\\b`));
    expect(read('README.md').match(/\bVersion \d+\.\d+\.\d+/g)).toEqual([`Version ${version}`]);
    const lock = JSON.parse(read('package-lock.json')) as {
      version: string;
      packages: Record<string, { version?: string }>;
    };
    expect(lock.version).toBe(version);
    expect(lock.packages['']?.version).toBe(version);
    // `npm run release` names its artifacts after package.json's version.
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the script's own template, as text
    expect(read('scripts/release.mjs')).toContain('`${pkg.name}-${pkg.version}.tgz`');
  });
});

describe('.ci/run', () => {
  it('installs from the lockfile and runs the README’s test command, failing on failure', () => {
    const ci = read('.ci/run');
    expect(ci).toMatch(/^set -euo pipefail$/m);
    expect(ci).toMatch(/^npm ci\b/m);
    expect(ci).toMatch(/^npm test$/m);
  });

  it('installs nothing of its own: the README’s command does (npm test’s pretest installs chromium and redis-server)', () => {
    const ci = read('.ci/run');
    expect(ci).not.toMatch(/apt-get install/);
    const pkg = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
    expect(pkg.scripts.pretest).toBe('node scripts/test-deps.mjs');
    expect(readme).toMatch(/^npm ci && npm test\b/m);
  });
});
