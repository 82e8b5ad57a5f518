import { readFileSync } from 'node:fs';

/**
 * Node's arguments in `npm start` (package.json: `node <args> dist/src/main.js`), so the bench runs the compiled bot
 * as production does; the image's CMD is held to the same command by test/unit/ops-packaging.test.ts.
 * `BENCH_NODE_DEFAULTS=1` runs bot and baselines on Node's defaults instead.
 */
export const START_NODE_ARGS: string[] = (() => {
  // BENCH_NODE_DEFAULTS=1: Node's defaults instead, to measure what the flags change.
  if (process.env.BENCH_NODE_DEFAULTS === '1') return [];
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    scripts: { start: string };
  };
  const words = pkg.scripts.start.split(/\s+/);
  if (words[0] !== 'node' || words.at(-1) !== 'dist/src/main.js')
    throw new Error(`npm start is not "node [args] dist/src/main.js": ${pkg.scripts.start}`);
  return words.slice(1, -1);
})();
