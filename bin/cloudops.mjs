#!/usr/bin/env node
// Runs the TypeScript CLI through tsx's ESM loader, registered for this process only.
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';

register({ tsconfig: fileURLToPath(new URL('../tsconfig.json', import.meta.url)) });
const { main } = await import('../src/cli/main.ts');
await main();
