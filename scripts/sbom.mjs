// The release's SBOM: CycloneDX 1.5 JSON of the runtime tree (`npm ls --omit=dev --all`), written by the CycloneDX
// project's own generator (@cyclonedx/cyclonedx-npm) from the lockfile, so it is the same whatever node_modules holds.
// `npm sbom --omit dev` is not used: it drops production packages that a dev dependency also reaches
// (@modelcontextprotocol/sdk, zod, yaml, express... npm/cli#7909), 126 of the tree's 228 packages here.
//
// The generator puts the lockfile's integrity only on a "distribution" reference, and only when the lockfile keeps
// the download URL (ours does not); Dependency-Track and Grype read a component's own `hashes`, so each component
// gets its lockfile integrity there, hex-encoded as CycloneDX wants.
//
//   node scripts/sbom.mjs [FILE]   writes FILE (default: stdout); the Dockerfile runs it so the image carries it.
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** CycloneDX 1.5: read by Trivy, Grype and Dependency-Track (4.9 and later) alike; 1.6 adds nothing used here. */
const SPEC_VERSION = '1.5';

/** Subresource-integrity algorithm names and the CycloneDX names of the same hashes. */
const ALGORITHMS = { sha1: 'SHA-1', sha256: 'SHA-256', sha384: 'SHA-384', sha512: 'SHA-512' };

/**
 * The CycloneDX hashes of a lockfile `integrity` ("sha512-<base64> sha1-<base64>"), strongest first.
 * @param {string | undefined} integrity
 * @returns {{ alg: string, content: string }[]}
 */
export function integrityHashes(integrity) {
  const hashes = [];
  for (const token of (integrity ?? '').split(/\s+/)) {
    const at = token.indexOf('-');
    const alg = ALGORITHMS[token.slice(0, at)];
    if (at < 0 || !alg) continue;
    hashes.push({ alg, content: Buffer.from(token.slice(at + 1), 'base64').toString('hex') });
  }
  return hashes.sort((a, b) => b.alg.localeCompare(a.alg));
}

/**
 * The SBOM of the project at `root` (its package.json and package-lock.json; node_modules is not read), as JSON text.
 * `modules` is where @cyclonedx/cyclonedx-npm is installed (the checkout's own node_modules by default).
 * @param {string} root
 * @param {string} [modules]
 * @returns {string}
 */
export function sbomOf(root, modules = root) {
  // The package exports only its entry point; its CLI sits beside it.
  const entry = createRequire(join(modules, 'package.json')).resolve('@cyclonedx/cyclonedx-npm');
  const cli = join(dirname(entry), 'bin', 'cyclonedx-npm-cli.js');
  const args = ['--omit', 'dev', '--package-lock-only', '--flatten-components', '--output-reproducible'];
  args.push('--spec-version', SPEC_VERSION, '--output-format', 'JSON', '--output-file', '-');
  const run = spawnSync(process.execPath, [cli, ...args], {
    cwd: root,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (run.status !== 0) throw new Error(`cyclonedx-npm failed (${run.status}):\n${run.stderr}`);
  const bom = JSON.parse(run.stdout);
  const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8'));
  for (const component of bom.components ?? []) {
    const path = component.properties?.find((p) => p.name === 'cdx:npm:package:path')?.value;
    const hashes = integrityHashes(lock.packages?.[path]?.integrity);
    if (hashes.length > 0) component.hashes = hashes;
  }
  return `${JSON.stringify(bom, null, 2)}\n`;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  const text = sbomOf(root);
  if (process.argv[2]) writeFileSync(process.argv[2], text);
  else process.stdout.write(text);
}
