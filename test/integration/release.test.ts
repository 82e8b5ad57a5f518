import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
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
  packages: Record<string, { version?: string; integrity?: string }>;
};

interface Component {
  'bom-ref': string;
  group?: string;
  name: string;
  version: string;
  purl: string;
  licenses?: { license?: { id?: string; name?: string }; expression?: string }[];
  hashes?: { alg: string; content: string }[];
}
interface Sbom {
  bomFormat: string;
  specVersion: string;
  metadata: { component: { name: string; version: string; 'bom-ref': string } };
  components: Component[];
  dependencies: { ref: string; dependsOn?: string[] }[];
}
interface LsNode {
  version?: string;
  extraneous?: boolean;
  dependencies?: Record<string, LsNode>;
}

const tarball = `${pkg.name}-${pkg.version}.tgz`;
const sbomFile = `${pkg.name}-${pkg.version}.cdx.json`;
const sha256 = async (file: string) =>
  createHash('sha256')
    .update(await readFile(file))
    .digest('hex');
const fullName = (c: Component) => (c.group ? `${c.group}/${c.name}` : c.name);

/** The lockfile's integrity of name@version, hex-encoded the way CycloneDX wants it. */
function lockSha512(name: string, version: string): string | undefined {
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (!path.endsWith(`node_modules/${name}`) || entry.version !== version) continue;
    const token = entry.integrity?.split(/\s+/).find((t) => t.startsWith('sha512-'));
    if (token) return Buffer.from(token.slice('sha512-'.length), 'base64').toString('hex');
  }
  return undefined;
}

describe('npm run release', { timeout: 600_000 }, () => {
  let scratch: string;
  let first: string;
  let second: string;
  let stdout: string;
  // A file the checkout has and git does not track, as a reviewer's scratch harness would be.
  const untracked = `release-untracked-${randomBytes(4).toString('hex')}.mjs`;
  const release = (out: string) => {
    const run = spawnSync('npm', ['run', 'release', '--', '--out', out], { cwd: repo, encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    return run.stdout;
  };
  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'cloudops-release-'));
    first = join(scratch, 'first');
    second = join(scratch, 'second');
    await writeFile(join(repo, untracked), 'export const secret = "not for the tarball";\n');
    try {
      stdout = release(first);
      release(second);
    } finally {
      await rm(join(repo, untracked), { force: true });
    }
    // Two whole releases (build, SBOM, pack): about 95 s on an idle 2-core machine, several minutes beside a busy one.
  }, 600_000);
  afterAll(async () => {
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  it('writes the tarball, the CycloneDX SBOM and SHA256SUMS, whose sums cover and match every artifact', async () => {
    expect((await readdir(first)).sort()).toEqual(['SHA256SUMS', sbomFile, tarball].sort());
    const sums = (await readFile(join(first, 'SHA256SUMS'), 'utf8')).trimEnd().split('\n');
    expect(sums.map((line) => line.split('  ')[1]).sort()).toEqual([sbomFile, tarball].sort());
    for (const line of sums) {
      const [hex, file] = line.split('  ');
      expect(hex, file).toBe(await sha256(join(first, file!)));
      expect(stdout).toContain(line);
    }
  });

  it('two releases of one commit give the same bytes (same SHA-256 for every artifact)', async () => {
    for (const file of [tarball, sbomFile, 'SHA256SUMS'])
      expect(await sha256(join(second, file)), file).toBe(await sha256(join(first, file)));
  });

  it('the tarball holds tracked files only: an untracked file in the checkout is not in it', () => {
    const files = spawnSync('tar', ['tzf', join(first, tarball)], { encoding: 'utf8' }).stdout.split('\n');
    expect(files).not.toContain(`package/${untracked}`);
    expect(files.filter((f) => f.includes('release-untracked-'))).toEqual([]);
    const tracked = new Set(
      spawnSync('git', ['ls-files'], { cwd: repo, encoding: 'utf8' }).stdout.trimEnd().split('\n'),
    );
    for (const file of files.filter((f) => f !== '').map((f) => f.replace(/^package\//, '')))
      if (!file.startsWith('dist/')) expect(tracked.has(file), file).toBe(true);
  });

  it('every entry is sorted by name, owned by 0:0, mode 644 or 755, dated at the commit', () => {
    const commitTime = Number(
      spawnSync('git', ['log', '-1', '--format=%ct'], { cwd: repo, encoding: 'utf8' }).stdout.trim(),
    );
    const list = spawnSync('tar', ['tzvf', join(first, tarball), '--numeric-owner', '--full-time'], {
      encoding: 'utf8',
      env: { ...process.env, TZ: 'UTC' },
    });
    const entries = list.stdout.trimEnd().split('\n');
    const names: string[] = [];
    for (const entry of entries) {
      const [mode, owner, , date, time, name] = entry.split(/\s+/);
      expect(mode, name).toMatch(/^-rw(-|x)r-(-|x)r-(-|x)$/);
      expect(owner, name).toBe('0/0');
      expect(Date.parse(`${date}T${time}Z`) / 1000, name).toBe(commitTime);
      names.push(name!);
    }
    expect(names).toEqual([...names].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
  });

  it('the tarball runs without compiling: dist/ and the CLI, the licence, no tests, no .env', () => {
    const list = spawnSync('tar', ['tzf', join(first, tarball)], { encoding: 'utf8' });
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

  it('the SBOM lists every package `npm ls --omit=dev --all` shows, each with purl, licence and the lockfile’s SHA-512, and the graph', async () => {
    const sbom = JSON.parse(await readFile(join(first, sbomFile), 'utf8')) as Sbom;
    expect(sbom.bomFormat).toBe('CycloneDX');
    expect(Number(sbom.specVersion)).toBeGreaterThanOrEqual(1.5);
    expect(sbom.metadata.component).toMatchObject({ name: pkg.name, version: pkg.version });
    const byRef = new Map(sbom.components.map((c) => [c['bom-ref'], `${fullName(c)}@${c.version}`]));
    byRef.set(sbom.metadata.component['bom-ref'], `${pkg.name}@${pkg.version}`);
    const byId = new Map(sbom.components.map((c) => [`${fullName(c)}@${c.version}`, c]));
    const edges = new Set(
      sbom.dependencies.flatMap((d) =>
        (d.dependsOn ?? []).map((to) => `${byRef.get(d.ref)} > ${byRef.get(to)}`),
      ),
    );

    // The installed runtime tree; npm exits 1 on an extraneous package but still prints the tree.
    const ls = spawnSync('npm', ['ls', '--omit=dev', '--all', '--json'], {
      cwd: repo,
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    });
    const tree = JSON.parse(ls.stdout) as LsNode;
    const seen = new Set<string>();
    const walk = (parent: string, node: LsNode) => {
      for (const [name, child] of Object.entries(node.dependencies ?? {})) {
        // No version: an optional peer nobody installed (bullmq's pg, redis). Extraneous: not in the lockfile.
        if (!child.version || child.extraneous) continue;
        const id = `${name}@${child.version}`;
        const component = byId.get(id);
        expect(component, `${id} missing from the SBOM`).toBeDefined();
        expect(edges.has(`${parent} > ${id}`), `${parent} > ${id} missing from the graph`).toBe(true);
        seen.add(id);
        expect(component!.purl, id).toBe(
          `pkg:npm/${name.replace(/^@/, '%40')}@${encodeURIComponent(child.version)}`,
        );
        const licence = component!.licenses?.[0];
        expect(licence?.license?.id ?? licence?.license?.name ?? licence?.expression, id).toBeTruthy();
        const sha512 = component!.hashes?.find((h) => h.alg === 'SHA-512')?.content;
        expect(sha512, id).toMatch(/^[0-9a-f]{128}$/);
        expect(sha512, id).toBe(lockSha512(name, child.version));
        walk(id, child);
      }
    };
    walk(`${pkg.name}@${pkg.version}`, tree);
    // The four direct dependencies an earlier SBOM (npm sbom) dropped, and express beneath them.
    for (const name of ['@modelcontextprotocol/sdk', 'zod', 'yaml', '@opentelemetry/api', 'express'])
      expect(
        [...seen].some((id) => id.startsWith(`${name}@`)),
        name,
      ).toBe(true);
    expect(seen.size).toBeGreaterThan(200);
    // Nothing beyond the tree either: every component is a package of it, or an optional platform build the
    // lockfile lists for other machines (npm ls shows only what this machine installed).
    for (const component of sbom.components.filter((c) => !seen.has(`${fullName(c)}@${c.version}`)))
      expect(fullName(component)).toMatch(/^@(resvg\/resvg-js|msgpackr-extract\/msgpackr-extract)-/);
    const names = new Set(sbom.components.map(fullName));
    for (const dev of ['vitest', 'typescript', '@biomejs/biome', 'tsx', '@cyclonedx/cyclonedx-npm'])
      expect(names.has(dev), dev).toBe(false);
  });
});

describe('npm run release --out', () => {
  it('refuses a folder holding files no release wrote, and deletes none of them (a typo such as --out .)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cloudops-release-out-'));
    try {
      await writeFile(join(dir, 'notes.txt'), 'mine\n');
      // An earlier release's own file beside it changes nothing: the folder is still refused whole.
      await writeFile(join(dir, 'SHA256SUMS'), 'old\n');
      const run = spawnSync('npm', ['run', 'release', '--', '--out', dir], { cwd: repo, encoding: 'utf8' });
      expect(await readFile(join(dir, 'notes.txt'), 'utf8')).toBe('mine\n');
      expect(run.status).toBe(1);
      expect(run.stderr).toContain(`release: ${dir} holds 1 file no release wrote (notes.txt)`);
      expect(run.stderr).toContain('Nothing was deleted.');
      expect((await readdir(dir)).sort()).toEqual(['SHA256SUMS', 'notes.txt']);
      // A file given as --out is not replaced either.
      const file = join(dir, 'notes.txt');
      const onFile = spawnSync('npm', ['run', 'release', '--', '--out', file], {
        cwd: repo,
        encoding: 'utf8',
      });
      expect(onFile.status).toBe(1);
      expect(onFile.stderr).toContain(`release: ${file} is not a folder`);
      expect(await readFile(file, 'utf8')).toBe('mine\n');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('npm run release on odd file names', () => {
  it('packs tracked files whose names start with a dash or hold a newline, as they are', async () => {
    // A clone of this commit with the odd names committed: the release packs its HEAD.
    const scratch = await mkdtemp(join(tmpdir(), 'cloudops-release-odd-'));
    const clone = join(scratch, 'repo');
    const git = (...args: string[]) => {
      const run = spawnSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], {
        cwd: clone,
        encoding: 'utf8',
      });
      expect(run.status, run.stderr).toBe(0);
    };
    try {
      expect(spawnSync('git', ['clone', '-q', repo, clone]).status).toBe(0);
      await symlink(join(repo, 'node_modules'), join(clone, 'node_modules'), 'dir');
      await writeFile(join(clone, '-dash.md'), 'dash\n');
      await writeFile(join(clone, 'docs', 'new\nline.md'), 'newline\n');
      git('add', '--', '-dash.md', 'docs/new\nline.md');
      git('commit', '-q', '-m', 'odd names');
      const out = join(scratch, 'out');
      const run = spawnSync(process.execPath, [join(clone, 'scripts', 'release.mjs'), '--out', out], {
        cwd: clone,
        encoding: 'utf8',
      });
      expect(run.status, run.stderr).toBe(0);
      const list = spawnSync('tar', ['tzf', join(out, tarball), '--quoting-style=escape'], {
        encoding: 'utf8',
      });
      const files = list.stdout.trimEnd().split('\n');
      expect(files).toContain('package/-dash.md');
      expect(files).toContain('package/docs/new\\nline.md');
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  });
});
