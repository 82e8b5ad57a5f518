import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_SEAL_KEY } from '../helpers/seal.ts';

// Every entry point on a Node.js older than 24 says so in one line and exits 1, before loading anything that needs
// Node 24 (undici failed with "Cannot read properties of undefined (reading 'bind')"). The machine's own
// /usr/bin/node is such an old Node; dist/ is built by the global setup, as npm start's prestart builds it.
const OLD_NODE = '/usr/bin/node';
const repo = fileURLToPath(new URL('../../', import.meta.url));
const oldMajor = existsSync(OLD_NODE)
  ? await new Promise<number>((resolve) =>
      execFile(OLD_NODE, ['-p', 'process.versions.node'], (_e, out) => resolve(Number(out.split('.')[0]))),
    )
  : Number.NaN;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cloudops-node-guard-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function run(args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      OLD_NODE,
      args,
      // A complete environment, so nothing but the Node version can stop it.
      {
        cwd: dir,
        timeout: 20_000,
        env: {
          PATH: process.env.PATH ?? '',
          SLACK_BOT_TOKEN: 'xoxb-node-guard',
          SLACK_SIGNING_SECRET: 'node-guard-secret',
          CLOUD_API_URL: 'http://127.0.0.1:9/',
          CLOUD_API_KEY: 'node-guard-key',
          SEAL_KEY: TEST_SEAL_KEY,
        },
      },
      (error, stdout, stderr) =>
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr }),
    );
  });
}

describe.skipIf(!(oldMajor < 24))(`on Node.js ${oldMajor} (${OLD_NODE})`, () => {
  it.each([
    ['node dist/src/main.js (npm start, the image)', [join(repo, 'dist', 'src', 'main.js')]],
    ['the CLI', [join(repo, 'bin', 'cloudops.mjs'), 'doctor']],
    ['the CLI --version', [join(repo, 'bin', 'cloudops.mjs'), '--version']],
  ])('%s: one line naming the version found and the one needed, exit 1', async (_name, args) => {
    const result = await run(args);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    const lines = result.stderr.trimEnd().split('\n');
    expect(lines, result.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(
      new RegExp(
        `^cloudops: Node\\.js ${oldMajor}\\.\\d+\\.\\d+ is too old: cloudops needs Node\\.js 24 or later`,
      ),
    );
  });
});
