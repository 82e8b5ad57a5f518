import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const pkg = JSON.parse(await readFile(join(repo, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
};
const lock = JSON.parse(await readFile(join(repo, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { version?: string }>;
};

interface Sbom {
  bomFormat: string;
  specVersion: string;
  metadata: { component: { name: string; version: string } };
  components: { name: string; version: string; purl: string; licenses?: { license: { id?: string } }[] }[];
}

describe('npm run release', { timeout: 180_000 }, () => {
  let out: string;
  let stdout: string;
  beforeAll(async () => {
    out = join(await mkdtemp(join(tmpdir(), 'cloudops-release-')), 'out');
    const run = spawnSync('npm', ['run', 'release', '--', '--out', out], { cwd: repo, encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    stdout = run.stdout;
  });
  afterAll(async () => {
    if (out) await rm(join(out, '..'), { recursive: true, force: true });
  });

  it('writes the tarball, the CycloneDX SBOM and SHA256SUMS, whose sums match the files', async () => {
    const tarball = `${pkg.name}-${pkg.version}.tgz`;
    const sbom = `${pkg.name}-${pkg.version}.cdx.json`;
    expect((await readdir(out)).sort()).toEqual(['SHA256SUMS', sbom, tarball].sort());
    const sums = (await readFile(join(out, 'SHA256SUMS'), 'utf8')).trimEnd().split('\n');
    expect(sums.map((line) => line.split('  ')[1])).toEqual([tarball, sbom]);
    for (const line of sums) {
      const [hex, file] = line.split('  ');
      const actual = createHash('sha256')
        .update(await readFile(join(out, file!)))
        .digest('hex');
      expect(hex, file).toBe(actual);
      expect(stdout).toContain(line);
    }
  });

  it('the tarball runs without compiling: dist/ and the CLI, the licence, no tests, no .env', () => {
    const list = spawnSync('tar', ['tzf', join(out, `${pkg.name}-${pkg.version}.tgz`)], { encoding: 'utf8' });
    const files = list.stdout.trimEnd().split('\n');
    for (const file of [
      'package/package.json',
      'package/LICENSE',
      'package/NOTICE',
      'package/SECURITY.md',
      'package/bin/cloudops.mjs',
      'package/dist/src/main.js',
      'package/dist/.built',
      'package/policy.example.yml',
    ])
      expect(files, file).toContain(file);
    expect(files.filter((f) => /^package\/(test|bench|\.ci)\//.test(f) || f === 'package/.env')).toEqual([]);
  });

  it('the SBOM lists the runtime dependencies at the lockfile’s versions with their licences, and no dev tools', async () => {
    const sbom = JSON.parse(await readFile(join(out, `${pkg.name}-${pkg.version}.cdx.json`), 'utf8')) as Sbom;
    expect(sbom.bomFormat).toBe('CycloneDX');
    expect(sbom.specVersion).toMatch(/^1\.\d+$/);
    expect(sbom.metadata.component).toMatchObject({ name: pkg.name, version: pkg.version });
    const undici = sbom.components.find((c) => c.name === 'undici');
    expect(undici).toMatchObject({
      version: lock.packages['node_modules/undici']?.version,
      purl: `pkg:npm/undici@${lock.packages['node_modules/undici']?.version}`,
    });
    expect(undici?.licenses?.[0]?.license.id).toBe('MIT');
    const names = new Set(sbom.components.map((c) => c.name));
    for (const dev of ['vitest', 'typescript', '@biomejs/biome', 'tsx'])
      expect(names.has(dev), dev).toBe(false);
  });
});
