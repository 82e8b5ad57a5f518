import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { delimiter } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

// The README's path runs the CLI as `npx cloudops …` in a fresh checkout (after `npm ci`), from a shell whose PATH
// is the user's own: npx finds the package's own bin and runs it on the Node that `npm ci` installed.
const repo = fileURLToPath(new URL('../../', import.meta.url));
const run = promisify(execFile);

/** The user's PATH: without the node_modules/.bin folders npm put in front of it for this test run. */
const userPath = (process.env.PATH ?? '')
  .split(delimiter)
  .filter((dir) => !dir.includes('node_modules'))
  .join(delimiter);

const npx = (args: string[]) =>
  run('npx', ['--no-install', 'cloudops', ...args], {
    cwd: repo,
    env: { PATH: userPath, HOME: process.env.HOME ?? '' },
    timeout: 90_000,
  });

describe('npx cloudops from a checkout', { timeout: 120_000 }, () => {
  it('prints the package version', async () => {
    const { version } = JSON.parse(readFileSync(`${repo}package.json`, 'utf8')) as { version: string };
    const { stdout } = await npx(['--version']);
    expect(stdout).toBe(`cloudops ${version}\n`);
  });

  it('checks the example policy, as the README asks before the first start', async () => {
    const { stdout } = await npx(['policy', 'check', 'policy.example.yml']);
    expect(stdout).toMatch(/^policy\.example\.yml: OK, version [0-9a-f]{12}, 2 project\(s\)/);
  });
});
