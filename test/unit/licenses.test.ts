import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { allowed, check, render, runtimePackages } from '../../scripts/licenses.mjs';

const repo = fileURLToPath(new URL('../../', import.meta.url));

/** A lockfile with the root, one runtime package per licence given, and a dev-only GPL package. */
function lockWith(licenses: Record<string, string | undefined>) {
  const packages: Record<string, Record<string, unknown>> = { '': { name: 'cloudops' } };
  for (const [name, license] of Object.entries(licenses))
    packages[`node_modules/${name}`] = { version: '1.0.0', ...(license ? { license } : {}) };
  packages['node_modules/dev-only'] = { version: '2.0.0', license: 'GPL-3.0-only', dev: true };
  return { packages };
}

describe('the runtime dependencies’ licences', () => {
  it('the checked-in list is current and every licence in it is allowed (npm test runs the same check)', () => {
    const run = spawnSync(process.execPath, ['scripts/licenses.mjs', '--check'], {
      cwd: repo,
      encoding: 'utf8',
    });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    const lock = JSON.parse(readFileSync(`${repo}package-lock.json`, 'utf8'));
    expect(readFileSync(`${repo}docs/licenses.md`, 'utf8')).toBe(render(runtimePackages(lock)));
  });

  it('a licence that would bind the user’s code, or none at all, is refused by name; dev-only packages are not shipped', () => {
    const packages = runtimePackages(
      lockWith({
        ok: 'MIT',
        gpl: 'GPL-3.0-or-later',
        agpl: 'AGPL-3.0-only',
        lgpl: 'LGPL-2.1',
        sspl: 'SSPL-1.0',
        none: undefined,
      }),
    );
    expect(packages.map((p) => p.name)).not.toContain('dev-only');
    expect(check(packages, render(packages))).toEqual([
      'agpl@1.0.0: licence AGPL-3.0-only is not on the allowed list',
      'gpl@1.0.0: licence GPL-3.0-or-later is not on the allowed list',
      'lgpl@1.0.0: licence LGPL-2.1 is not on the allowed list',
      'none@1.0.0: licence (none given) is not on the allowed list',
      'sspl@1.0.0: licence SSPL-1.0 is not on the allowed list',
    ]);
  });

  it('a list that no longer matches the lockfile is stale', () => {
    const packages = runtimePackages(lockWith({ a: 'MIT', b: 'ISC' }));
    const before = render(runtimePackages(lockWith({ a: 'MIT' })));
    expect(check(packages, before)).toEqual([
      'docs/licenses.md is stale: run `node scripts/licenses.mjs` and commit it',
    ]);
  });

  it('SPDX expressions: OR needs one allowed side, AND both', () => {
    expect(allowed('(MIT OR GPL-3.0-only)')).toBe(true);
    expect(allowed('MIT AND GPL-2.0-only')).toBe(false);
    expect(allowed('(MIT AND Zlib) OR SSPL-1.0')).toBe(true);
    expect(allowed('SEE LICENSE IN LICENSE.txt')).toBe(false);
    expect(allowed('UNLICENSED')).toBe(false);
  });
});
