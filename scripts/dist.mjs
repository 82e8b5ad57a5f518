// Whether dist/ holds a build of the current sources: `npm start` builds first when it does not, and the
// CLI runs dist/ when it does. Plain JavaScript, so it runs before anything is compiled.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** Written by `npm run build` after tsc succeeded; its mtime is the build's. */
export const STAMP = join('dist', '.built');

/** What the build compiles (tsconfig.build.json) and what changes its output, relative to the root. */
const INPUTS = ['src', 'sim/cloud', 'tsconfig.json', 'tsconfig.build.json', 'package-lock.json'];

/** Newest mtime (ms) under `path`, or 0 when it does not exist. */
function newest(root, path) {
  const full = join(root, path);
  if (!existsSync(full)) return 0;
  const stat = statSync(full);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let latest = stat.mtimeMs;
  for (const entry of readdirSync(full)) latest = Math.max(latest, newest(root, `${path}/${entry}`));
  return latest;
}

/**
 * `current`: dist/ was built after every input last changed (or the sources are not here, as in the image);
 * `stale`: a source changed since; `missing`: never built.
 * @param {string} root the repository root
 * @returns {'current' | 'stale' | 'missing'}
 */
export function distState(root) {
  const stamp = join(root, STAMP);
  if (!existsSync(stamp)) return 'missing';
  if (!existsSync(join(root, 'src'))) return 'current';
  const built = statSync(stamp).mtimeMs;
  return INPUTS.some((input) => newest(root, input) > built) ? 'stale' : 'current';
}
