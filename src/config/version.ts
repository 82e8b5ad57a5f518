import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The version in the package's package.json, found by walking up from this file: `src/config/` in a checkout,
 * `dist/src/config/` in a build and in the image.
 */
export function packageVersion(from = dirname(fileURLToPath(import.meta.url))): string {
  for (let dir = from; ; dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'cloudops' && pkg.version) return pkg.version;
    } catch {
      // No package.json here (or not ours): look one level up.
    }
    if (dirname(dir) === dir) return 'unknown';
  }
}
