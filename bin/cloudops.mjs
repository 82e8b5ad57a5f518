#!/usr/bin/env node
// The operator CLI. Runs the compiled dist/ (the image, or a checkout after `npm run build`); in a checkout whose
// dist/ is missing or older than the sources, runs the TypeScript through tsx's loader (a devDependency) instead.
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { distState } from '../scripts/dist.mjs';

// Before anything that needs Node 24 is loaded (src/startup/node-guard.ts makes the same check for the bot).
const REQUIRED_NODE_MAJOR = 24;
if (Number(process.versions.node.split('.')[0]) < REQUIRED_NODE_MAJOR) {
  process.stderr.write(
    `cloudops: Node.js ${process.versions.node} is too old: cloudops needs Node.js ${REQUIRED_NODE_MAJOR} or later (nodejs.org, or nvm install ${REQUIRED_NODE_MAJOR})\n`,
  );
  process.exit(1);
}
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
let entry = join(root, 'dist', 'src', 'cli', 'main.js');
if (distState(root) !== 'current') {
  const { register } = await import('tsx/esm/api');
  register({ tsconfig: join(root, 'tsconfig.json') });
  entry = join(root, 'src', 'cli', 'main.ts');
}
const { main } = await import(pathToFileURL(entry).href);
await main();
