// `npm run build` (always) and `npm start`'s prestart (`--if-stale`): tsc with tsconfig.build.json into dist/,
// then the stamp that scripts/dist.mjs compares the sources against. tsc is incremental, so a rebuild after a
// small change recompiles little.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { distState, STAMP } from './dist.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const state = distState(root);
if (process.argv.includes('--if-stale') && state === 'current') process.exit(0);

let tsc;
try {
  tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc');
} catch {
  // A production install (npm ci --omit=dev) has no compiler: run what was built, or say how to build.
  if (existsSync(join(root, STAMP))) process.exit(0);
  process.stderr.write(
    'cloudops: dist/ is missing and TypeScript is not installed: run npm ci && npm run build\n',
  );
  process.exit(1);
}
if (state !== 'current') process.stderr.write(`cloudops: dist/ is ${state}, building (npm run build)\n`);
// The stamp takes the time the build started, so a file saved during the build still makes dist/ stale.
const startedAt = new Date();
const build = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], {
  cwd: root,
  stdio: 'inherit',
});
if (build.status !== 0) process.exit(build.status ?? 1);
mkdirSync(join(root, 'dist'), { recursive: true });
// The verification page's script and style are served as they are: tsc does not copy them.
cpSync(join(root, 'src/verify/assets'), join(root, 'dist/src/verify/assets'), { recursive: true });
writeFileSync(join(root, STAMP), `${startedAt.toISOString()}\n`);
utimesSync(join(root, STAMP), startedAt, startedAt);
