// `npm run lint` / `npm run format`: biome on the files git tracks, so an untracked scratch file in the checkout
// does not fail `npm test`. Outside a git checkout (an unpacked tarball) it checks the whole tree as before.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const biome = createRequire(join(root, 'package.json')).resolve('@biomejs/biome/bin/biome');
const listed = spawnSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' });
const tracked =
  listed.status === 0
    ? listed.stdout.split('\0').filter((file) => file !== '' && existsSync(join(root, file)))
    : ['.'];
const run = spawnSync(
  process.execPath,
  [
    biome,
    'check',
    '--files-ignore-unknown=true',
    '--no-errors-on-unmatched',
    ...process.argv.slice(2),
    ...tracked,
  ],
  { cwd: root, stdio: 'inherit' },
);
process.exit(run.status ?? 1);
