import { mkdir, mkdtemp, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { distState } from '../../scripts/dist.mjs';

const repo = fileURLToPath(new URL('../../', import.meta.url));

/** Every file under `dir`, recursively, relative to it. */
async function files(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)));
}

describe('dist/ as `npm run build` leaves it (the global setup builds it when stale)', () => {
  it('has a .js file for every source file production runs, and no import of a .ts file', async () => {
    const sources = [
      ...(await files(join(repo, 'src'))).map((f) => `src/${f}`),
      ...(await files(join(repo, 'sim', 'cloud'))).map((f) => `sim/cloud/${f}`),
    ].filter((f) => f.endsWith('.ts'));
    expect(sources.length).toBeGreaterThan(50);
    const built = new Set(await files(join(repo, 'dist')));
    for (const source of sources) expect(built.has(source.replace(/\.ts$/, '.js')), source).toBe(true);
    for (const file of [...built].filter((f) => f.endsWith('.js'))) {
      const text = await readFile(join(repo, 'dist', file), 'utf8');
      expect(text, file).not.toMatch(/(from|import\()\s*['"][^'"]+\.ts['"]/);
    }
    // The demo needs devDependencies (ajv): it runs from source in development, never from dist/.
    expect([...built].some((f) => f.startsWith('demo/'))).toBe(false);
    expect(await readFile(join(repo, 'dist', 'src', 'main.js'), 'utf8')).toMatch(
      /export async function main\(/,
    );
  });
});

describe('distState: when `npm start` builds first', () => {
  let root: string | undefined;
  afterEach(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });

  /** A tree shaped like the repository: a source, a test, the demo and the stamp, all at `at`. */
  async function tree(at: Date): Promise<string> {
    root = await mkdtemp(join(tmpdir(), 'cloudops-dist-'));
    for (const dir of ['src/config', 'demo', 'sim/cloud', 'test', 'dist'])
      await mkdir(join(root, dir), { recursive: true });
    for (const file of [
      'src/config/env.ts',
      'demo/main.ts',
      'sim/cloud/server.ts',
      'test/a.test.ts',
      'tsconfig.json',
    ]) {
      await writeFile(join(root, file), '');
    }
    await writeFile(join(root, 'dist/.built'), '');
    for (const path of [
      'src/config/env.ts',
      'src/config',
      'src',
      'demo/main.ts',
      'demo',
      'sim/cloud/server.ts',
      'sim/cloud',
      'test/a.test.ts',
      'tsconfig.json',
      'dist/.built',
    ]) {
      await utimes(join(root, path), at, at);
    }
    return root;
  }

  it('is missing before the first build, current after it, stale once a compiled input changes', async () => {
    const dir = await tree(new Date(Date.now() - 60_000));
    expect(distState(dir)).toBe('current');
    await utimes(join(dir, 'src/config/env.ts'), new Date(), new Date());
    expect(distState(dir)).toBe('stale');
    await utimes(join(dir, 'dist/.built'), new Date(Date.now() + 1000), new Date(Date.now() + 1000));
    expect(distState(dir)).toBe('current');
    await utimes(join(dir, 'tsconfig.json'), new Date(Date.now() + 2000), new Date(Date.now() + 2000));
    expect(distState(dir)).toBe('stale');
    await rm(join(dir, 'dist'), { recursive: true });
    expect(distState(dir)).toBe('missing');
  });

  it('ignores what the build does not compile (tests, the demo), and trusts dist/ where no sources are (the image)', async () => {
    const dir = await tree(new Date(Date.now() - 60_000));
    const later = new Date();
    for (const path of ['test/a.test.ts', 'demo/main.ts']) await utimes(join(dir, path), later, later);
    expect(distState(dir)).toBe('current');
    await writeFile(join(dir, 'sim/cloud/new.ts'), '');
    expect(distState(dir)).toBe('stale');
    await rm(join(dir, 'src'), { recursive: true });
    expect(distState(dir)).toBe('current');
  });
});
