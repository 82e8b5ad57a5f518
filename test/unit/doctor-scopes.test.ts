import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { REQUIRED_NODE_MAJOR } from '../../src/doctor/run.ts';
import { BOT_SCOPES } from '../../src/doctor/scopes.ts';

const repo = fileURLToPath(new URL('../../', import.meta.url));

describe('what doctor and the Node guards compare against', () => {
  it("the bot scopes are manifest.yml's, no more and no fewer", () => {
    const manifest = parse(readFileSync(join(repo, 'manifest.yml'), 'utf8')) as {
      oauth_config?: { scopes?: { bot?: string[] } };
    };
    expect(Object.keys(BOT_SCOPES).toSorted()).toEqual((manifest.oauth_config?.scopes?.bot ?? []).toSorted());
  });

  it("the Node.js version is package.json's engines", () => {
    const pkg = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { engines: { node: string } };
    expect(pkg.engines.node).toBe(`>=${REQUIRED_NODE_MAJOR}`);
    // The CLI's own guard (bin/cloudops.mjs runs before anything is compiled) asks for the same.
    expect(readFileSync(join(repo, 'bin', 'cloudops.mjs'), 'utf8')).toContain(
      `const REQUIRED_NODE_MAJOR = ${REQUIRED_NODE_MAJOR};`,
    );
  });
});
