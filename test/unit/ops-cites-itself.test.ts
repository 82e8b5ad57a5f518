import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// Users clone the repository alone: code, comments, tests and docs cite the repository's own docs
// (e.g. docs/operations.md#shutdown), never a file beside or above it.
const repo = fileURLToPath(new URL('../../', import.meta.url)).replace(/\/$/, '');

// Built from pieces so that this file does not cite what it looks for.
// The team's contract and its style guide live beside the repository, not in it.
const CONTRACT = new RegExp(`\\b(${'PRODUCT'}|${'STYLE'})\\.md`);
const TEAM_FOLDER = new RegExp(`\\.\\./${'shared'}\\b|/${'work'}/(${'shared'}|main|wt|tools|notes)\\b`);
/** A run of `../` and the name after it: a relative path that may climb out of the repository. */
const CLIMB = /(?:^|[^\w.])((?:\.\.\/)+[\w.-]*)/g;

const tracked = execFileSync('git', ['ls-files', '-z'], { cwd: repo, encoding: 'utf8' })
  .split('\0')
  .filter((path) => path !== '')
  .map((path) => ({ path, text: readFileSync(join(repo, path)) }))
  .filter(({ text }) => !text.includes(0))
  .map(({ path, text }) => ({ path, lines: text.toString('utf8').split('\n') }));

const inside = (path: string) => path === repo || path.startsWith(repo + sep);

/** `file:line: text` for each line of a tracked file that `offends`. */
function findAll(offends: (line: string, path: string) => boolean): string[] {
  return tracked.flatMap(({ path, lines }) =>
    lines.flatMap((line, index) => (offends(line, path) ? [`${path}:${index + 1}: ${line.trim()}`] : [])),
  );
}

describe('every tracked file cites only the repository', () => {
  it('reads the files git tracks', () => {
    expect(tracked.length).toBeGreaterThan(100);
    expect(tracked.map(({ path }) => path)).toContain('README.md');
  });

  it('no file cites the team contract', () => {
    expect(findAll((line) => CONTRACT.test(line))).toEqual([]);
  });

  it("no file names the team's shared folder or the machine's work folders", () => {
    expect(findAll((line) => TEAM_FOLDER.test(line))).toEqual([]);
  });

  it('no relative path climbs out of the repository', () => {
    const climbs = (line: string, path: string) =>
      [...line.matchAll(CLIMB)].some((match) => !inside(resolve(repo, dirname(path), match[1]!)));
    expect(findAll(climbs)).toEqual([]);
  });

  it('catches each kind of citation it is meant to', () => {
    const sample = (line: string) => ({ contract: CONTRACT.test(line), folder: TEAM_FOLDER.test(line) });
    expect(sample(`see ${'PRODUCT'}.md §6`)).toEqual({ contract: true, folder: false });
    expect(sample(`(${'STYLE'}.md lesson 2)`)).toEqual({ contract: true, folder: false });
    expect(sample(`(../${'shared'}/cloud-api-spec.md)`)).toEqual({ contract: false, folder: true });
    expect(sample(`/${'work'}/main/policy.example.yml`)).toEqual({ contract: false, folder: true });
    expect(sample('see docs/operations.md#shutdown')).toEqual({ contract: false, folder: false });
    const up = '../'.repeat(3);
    const out = [...`[spec](${up}x.md)`.matchAll(CLIMB)].map((match) => match[1]);
    expect(out).toEqual([`${up}x.md`]);
    expect(inside(resolve(repo, 'test/unit', out[0]!))).toBe(false);
    expect(inside(resolve(repo, 'test/unit', '../../docs/policy.md'))).toBe(true);
  });
});
