#!/usr/bin/env node
// `npm run release [-- --out DIR]`: what a release publishes, into DIR (default release/<version>/, emptied first):
//   cloudops-<version>.tgz        `npm pack` of the project with the compiled dist/ (built first when stale)
//   cloudops-<version>.cdx.json   CycloneDX SBOM of the runtime dependencies (`npm sbom`, from the lockfile)
//   SHA256SUMS                    `sha256sum -c SHA256SUMS` checks both
// Prints the folder and each file with its SHA-256.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8'));
const at = process.argv.indexOf('--out');
const out = resolve(
  at > 0 && process.argv[at + 1] ? process.argv[at + 1] : join(repo, 'release', pkg.version),
);

/** Runs a command in the repository; stops the release with its output when it fails. */
function run(command, args) {
  const result = spawnSync(command, args, { cwd: repo, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (result.status !== 0) {
    process.stderr.write(
      `release: ${command} ${args.join(' ')} failed\n${result.stderr ?? ''}${result.stdout ?? ''}`,
    );
    process.exit(1);
  }
  return result.stdout;
}

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
// The tarball carries dist/: build it when a compiled input changed since the last build.
run(process.execPath, [join(repo, 'scripts', 'build.mjs'), '--if-stale']);
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const [packed] = JSON.parse(run(npm, ['pack', '--json', '--pack-destination', out]));
const tarball = packed.filename;

// From the lockfile, not node_modules: the same SBOM whatever is installed locally. npm names the root component
// after the directory it runs in, so the package's own name is put back.
const sbom = JSON.parse(
  run(npm, ['sbom', '--sbom-format', 'cyclonedx', '--omit', 'dev', '--package-lock-only']),
);
if (sbom.metadata?.component) sbom.metadata.component.name = pkg.name;
const sbomFile = `${pkg.name}-${pkg.version}.cdx.json`;
writeFileSync(join(out, sbomFile), `${JSON.stringify(sbom, null, 2)}\n`);

const sums = [tarball, sbomFile].map((file) => {
  const hex = createHash('sha256')
    .update(readFileSync(join(out, file)))
    .digest('hex');
  return `${hex}  ${file}`;
});
writeFileSync(join(out, 'SHA256SUMS'), `${sums.join('\n')}\n`);

process.stdout.write(`release ${pkg.name} ${pkg.version} in ${out}\n`);
for (const line of sums) process.stdout.write(`  ${line}\n`);
if (readdirSync(out).length !== 3) {
  process.stderr.write(`release: expected 3 files in ${out}, found ${readdirSync(out).join(', ')}\n`);
  process.exit(1);
}
