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
  const specs = [
    ...text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]/g),
    // A module loaded on demand (tracing's SDK) is an arrow too.
    ...text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g),
  ].map((m) => m[1] ?? '');
  return {
    file: relative(root, file),
    lines: text.split('\n').length - (text.endsWith('\n') ? 1 : 0),
    ours: specs.filter((s) => s.startsWith('.')).map((s) => relative(root, resolve(dirname(file), s))),
    packages: specs.filter((s) => !s.startsWith('.')),
  };
});

/** No file in src/ over this many lines: a longer one is split along what it does. */
const MAX_LINES = 450;

/**
 * The import circles of src/: each strongly connected component of the file graph with more than one file
 * (Tarjan's algorithm), its files sorted.
 */
function circles(): string[][] {
  const arrows = new Map(imports.map((i) => [i.file, i.ours.filter((p) => p.endsWith('.ts'))]));
  const order = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const found: string[][] = [];
  const visit = (file: string) => {
    order.set(file, order.size);
    low.set(file, order.get(file)!);
    stack.push(file);
    for (const next of arrows.get(file) ?? []) {
      if (!arrows.has(next)) continue;
      if (!order.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file)!, low.get(next)!));
      } else if (stack.includes(next)) low.set(file, Math.min(low.get(file)!, order.get(next)!));
    }
    if (low.get(file) !== order.get(file)) return;
    const component: string[] = [];
    for (let top = stack.pop(); top !== undefined; top = top === file ? undefined : stack.pop())
      component.push(top);
    if (component.length > 1) found.push(component.sort());
  };
  for (const file of arrows.keys()) if (!order.has(file)) visit(file);
  return found;
}

const under = (folder: string) => imports.filter((i) => i.file.startsWith(`src/${folder}/`));

describe('the folders read as the flow: no import runs back up', () => {
  it('finds the sources', () => {
    expect(imports.length).toBeGreaterThan(80);
  });

  it('config/ imports nothing of ours but config/ and rules/', () => {
    for (const { file, ours } of under('config'))
      expect(
        ours.filter((p) => !/^src\/(config|rules)\//.test(p)),
        file,
      ).toEqual([]);
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

  it('tickets/ is a client like cloud/: nothing of ours but config/, no Slack, no queues, no requests', () => {
    expect(under('tickets').length).toBeGreaterThan(0);
    for (const { file, ours, packages } of under('tickets')) {
      expect(
        ours.filter((p) => !/^src\/(tickets|config)\//.test(p)),
        file,
      ).toEqual([]);
      expect(
        packages.filter((p) => p.startsWith('@slack/') || p === 'bullmq' || p === 'ioredis'),
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

describe('the structure stays easy to see', () => {
  it(`no file in src/ is over ${MAX_LINES} lines`, () => {
    expect(imports.filter((i) => i.lines > MAX_LINES).map((i) => `${i.file}: ${i.lines} lines`)).toEqual([]);
  });

  it('requests/ keeps at most 12 files of its own; the rest live in its rooms', () => {
    const own = imports.filter((i) => dirname(i.file) === 'src/requests');
    expect(own.length).toBeGreaterThan(0);
    expect(own.length).toBeLessThanOrEqual(12);
  });

  it("only requests/ changes a request's state: nothing else calls the store's transition", () => {
    const outside = imports
      .filter((i) => !i.file.startsWith('src/requests/'))
      .filter((i) => /\.transition\(/.test(readFileSync(join(root, i.file), 'utf8')))
      .map((i) => i.file);
    expect(outside).toEqual([]);
  });

  it('no import circle at all, type-only imports included', () => {
    expect(circles()).toEqual([]);
  });
});
