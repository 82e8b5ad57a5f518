import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '..', '..');
const src = join(root, 'src');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = join(dir, name);
    return statSync(full).isDirectory() ? sources(full) : full.endsWith('.ts') ? [full] : [];
  });
}

/** Every import of every file under src/, as repository paths (ours) or package names. */
const imports = sources(src).map((file) => {
  const text = readFileSync(file, 'utf8');
  const specs = [...text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]/g)].map(
    (m) => m[1] ?? '',
  );
  return {
    file: relative(root, file),
    ours: specs.filter((s) => s.startsWith('.')).map((s) => relative(root, resolve(dirname(file), s))),
    packages: specs.filter((s) => !s.startsWith('.')),
  };
});

const under = (folder: string) => imports.filter((i) => i.file.startsWith(`src/${folder}/`));

describe('the folders read as the flow: no import runs back up', () => {
  it('finds the sources', () => {
    expect(imports.length).toBeGreaterThan(80);
  });

  it('requests/, jobs/, pricing/, rules/, cloud/ and config/ import nothing from slack/', () => {
    for (const folder of ['requests', 'jobs', 'pricing', 'rules', 'cloud', 'config']) {
      for (const { file, ours } of under(folder)) {
        expect(
          ours.filter((p) => p.startsWith('src/slack/')),
          file,
        ).toEqual([]);
      }
    }
  });

  it('requests/ uses no Slack package and nothing of the queues but what they implement for it', () => {
    for (const { file, ours, packages } of under('requests')) {
      expect(
        packages.filter((p) => p.startsWith('@slack/') || p === 'bullmq'),
        file,
      ).toEqual([]);
      expect(
        ours.filter((p) => p.startsWith('src/jobs/')),
        file,
      ).toEqual([]);
    }
  });

  it('rules/ imports nothing of ours outside rules/; pricing/ nothing outside pricing/, rules/ and cloud/', () => {
    for (const { file, ours } of under('rules'))
      expect(
        ours.filter((p) => !p.startsWith('src/rules/')),
        file,
      ).toEqual([]);
    for (const { file, ours } of under('pricing'))
      expect(
        ours.filter((p) => !/^src\/(pricing|rules|cloud)\//.test(p)),
        file,
      ).toEqual([]);
  });

  it('audit-export/ is an adapter over requests/: no Slack, no MCP, no queues, no cloud API', () => {
    expect(under('audit-export').length).toBeGreaterThan(0);
    for (const { file, ours, packages } of under('audit-export')) {
      expect(
        ours.filter((p) => !/^src\/(audit-export|requests|observability|config)\//.test(p)),
        file,
      ).toEqual([]);
      expect(
        packages.filter((p) => p.startsWith('@slack/') || p === 'bullmq'),
        file,
      ).toEqual([]);
    }
  });

  it('slack/ never calls the cloud API itself and has one tree (no slack/pricing)', () => {
    for (const { file, ours } of under('slack')) {
      expect(
        ours.filter((p) => p === 'src/cloud/client.ts'),
        file,
      ).toEqual([]);
    }
    expect(imports.some((i) => i.file.startsWith('src/slack/pricing/'))).toBe(false);
    expect(imports.some((i) => i.file.startsWith('src/demo/'))).toBe(false);
  });
});
