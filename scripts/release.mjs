#!/usr/bin/env node
// `npm run release [-- --out DIR]`: what a release publishes, into DIR (default release/<version>/; a
// folder holding anything an earlier release did not write is refused, an earlier release's files are replaced):
//   cloudops-<version>.tgz        the committed tree (HEAD) as npm would pack it, with the compiled dist/
//   cloudops-<version>.cdx.json   CycloneDX SBOM of the runtime tree (scripts/sbom.mjs)
//   SHA256SUMS                    `sha256sum -c SHA256SUMS` checks every artifact
// Prints the folder and each file with its SHA-256.
//
// Only tracked files go in: HEAD is exported with `git archive` into a scratch folder, built there, and packed
// from there, so nothing untracked (a scratch harness, a local .env) or uncommitted reaches the tarball. Two runs
// on one commit give the same bytes: every entry carries the commit's time, owner 0:0, mode 644 or 755, sorted by
// name; gzip writes no time of its own. docs/operations.md#releases says how to check a release.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { STAMP } from './dist.mjs';
import { sbomOf } from './sbom.mjs';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8'));
const at = process.argv.indexOf('--out');
const out = resolve(
  at > 0 && process.argv[at + 1] ? process.argv[at + 1] : join(repo, 'release', pkg.version),
);

/** Whether `name` is a file a release writes into its folder: only those are deleted when it is emptied. */
const releaseFile = (name) =>
  name === 'SHA256SUMS' ||
  (name.startsWith(`${pkg.name}-`) && (name.endsWith('.tgz') || name.endsWith('.cdx.json')));

/**
 * Why `dir` may not be emptied for this release, or undefined: it is a file, or it holds anything an earlier release
 * did not write (`--out .` or `--out docs` would otherwise delete the checkout or a folder of it).
 */
function notReleaseFolder(dir) {
  let entries;
  try {
    if (!statSync(dir).isDirectory()) return `${dir} is not a folder`;
    entries = readdirSync(dir);
  } catch (error) {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  }
  const foreign = entries.filter((name) => !releaseFile(name));
  if (foreign.length === 0) return undefined;
  return `${dir} holds ${foreign.length} file${foreign.length === 1 ? '' : 's'} no release wrote (${foreign.slice(0, 3).join(', ')}${foreign.length > 3 ? ', …' : ''})`;
}

/** Runs a command; stops the release with its output when it fails. */
function run(command, args, cwd = repo) {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (result.status !== 0) {
    process.stderr.write(
      `release: ${command} ${args.join(' ')} failed\n${result.stderr ?? ''}${result.stdout ?? ''}`,
    );
    process.exit(1);
  }
  return result.stdout;
}

/** HEAD's tree in `dir` (tracked files only), built, with every file dated at the commit. */
function stage(dir, commitTime) {
  run('git', ['archive', '--format=tar', '-o', join(dir, '..', 'head.tar'), 'HEAD']);
  run('tar', ['-xf', join(dir, '..', 'head.tar'), '-C', dir]);
  // The compiler from this checkout's node_modules; nothing is installed into the scratch folder.
  symlinkSync(join(repo, 'node_modules'), join(dir, 'node_modules'), 'dir');
  run(process.execPath, [join(dir, 'scripts', 'build.mjs')], dir);
  writeFileSync(join(dir, STAMP), `${new Date(commitTime * 1000).toISOString()}\n`);
  // The compiler's incremental cache: nothing runs it, and it would only make a rebuild skip work.
  rmSync(join(dir, 'dist', '.tsbuildinfo'), { force: true });
}

/** What `npm pack` would put in (package.json `files`, .npmignore), sorted by byte order. */
function packList(dir) {
  const [packed] = JSON.parse(run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], dir));
  return packed.files.map((file) => file.path).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** A gzipped tar of `files` under package/, the same bytes for the same files and commit time. */
function reproducibleTarball(dir, files, commitTime) {
  const tar = spawnSync(
    'tar',
    [
      '--create',
      '--format=gnu',
      `--mtime=@${commitTime}`,
      '--owner=0',
      '--group=0',
      '--numeric-owner',
      '--mode=u=rwX,go=rX',
      '--no-recursion',
      '--transform=s,^,package/,',
      // One name per NUL, each a name and never an option: a tracked file may start with '-' or hold a newline.
      '--null',
      '--verbatim-files-from',
      '--files-from=-',
    ],
    { cwd: dir, input: files.join('\0'), maxBuffer: 512 * 1024 * 1024 },
  );
  if (tar.status !== 0) {
    process.stderr.write(`release: tar failed\n${tar.stderr}`);
    process.exit(1);
  }
  // Node's gzip header carries no file name and a zero time.
  return gzipSync(tar.stdout, { level: 9 });
}

const refused = notReleaseFolder(out);
if (refused) {
  process.stderr.write(`release: ${refused}; give --out a new or empty folder. Nothing was deleted.\n`);
  process.exit(1);
}
const commitTime = Number(run('git', ['log', '-1', '--format=%ct', 'HEAD']).trim());
if (run('git', ['status', '--porcelain', '--untracked-files=no']).trim() !== '')
  process.stderr.write('release: uncommitted changes are not in the release (it packs HEAD)\n');

const scratch = mkdtempSync(join(tmpdir(), 'cloudops-release-'));
try {
  const dir = join(scratch, 'package');
  mkdirSync(dir);
  stage(dir, commitTime);
  const tarball = `${pkg.name}-${pkg.version}.tgz`;
  const sbomFile = `${pkg.name}-${pkg.version}.cdx.json`;
  const gz = reproducibleTarball(dir, packList(dir), commitTime);
  const sbom = sbomOf(dir, repo);

  // Only an earlier release's files are there (checked above): those go.
  mkdirSync(out, { recursive: true });
  for (const file of readdirSync(out)) rmSync(join(out, file), { force: true });
  writeFileSync(join(out, tarball), gz);
  writeFileSync(join(out, sbomFile), sbom);
  const sums = [tarball, sbomFile].map((file) => {
    const hex = createHash('sha256')
      .update(readFileSync(join(out, file)))
      .digest('hex');
    return `${hex}  ${file}`;
  });
  writeFileSync(join(out, 'SHA256SUMS'), `${sums.join('\n')}\n`);
  for (const file of readdirSync(out))
    utimesSync(join(out, file), new Date(commitTime * 1000), new Date(commitTime * 1000));

  process.stdout.write(`release ${pkg.name} ${pkg.version} in ${out}\n`);
  for (const line of sums) process.stdout.write(`  ${line}\n`);
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
