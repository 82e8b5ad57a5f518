import { readFileSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { describe, expect, it } from 'vitest';

// docs/agents.md's client entries are copied as they are: each must be what its client reads.
const doc = readFileSync(new URL('../../docs/agents.md', import.meta.url), 'utf8');

interface StdioEntry {
  type?: string;
  command: string;
  args?: string[];
  env?: Record<string, string>;
}
interface HttpEntry {
  type?: string;
  url: string;
  headers?: Record<string, string>;
}
type Entry = StdioEntry | HttpEntry;

/** Each ```json block with the `### heading` it sits under. */
function jsonBlocks(): { heading: string; json: Record<string, Record<string, Entry>> }[] {
  const out: { heading: string; json: Record<string, Record<string, Entry>> }[] = [];
  let heading = '';
  const lines = doc.split('\n');
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i]!;
    if (/^#{2,4} /.test(line)) heading = line.replace(/^#+ /, '');
    if (line.trim() !== '```json') continue;
    const end = lines.indexOf('```', i + 1);
    out.push({ heading, json: JSON.parse(lines.slice(i + 1, end).join('\n')) });
    i = end;
  }
  return out;
}

const isStdio = (entry: Entry): entry is StdioEntry => 'command' in entry;

describe('docs/agents.md client entries', () => {
  const blocks = jsonBlocks();

  it('has an entry for Claude Code, Claude Desktop, Cursor and VS Code', () => {
    for (const client of ['Claude Code', 'Claude Desktop', 'Cursor', 'VS Code'])
      expect(blocks.filter((b) => b.heading.includes(client)).length, client).toBeGreaterThan(0);
    expect(doc).toMatch(/^claude mcp add --transport http cloudops /m);
  });

  it('VS Code’s mcp.json uses `servers` with a type on each entry; the others use `mcpServers`', () => {
    for (const { heading, json } of blocks) {
      if (heading.includes('VS Code')) {
        expect(Object.keys(json), heading).toContain('servers');
        expect(json).not.toHaveProperty('mcpServers');
        for (const entry of Object.values(json.servers!)) expect(['stdio', 'http']).toContain(entry.type);
      } else {
        expect(Object.keys(json), heading).toEqual(['mcpServers']);
      }
    }
  });

  it('Claude Desktop’s entries are stdio only (it does not load "type": "http")', () => {
    for (const { heading, json } of blocks.filter((b) => b.heading.includes('Claude Desktop')))
      for (const entry of Object.values(json.mcpServers!)) expect(isStdio(entry), heading).toBe(true);
  });

  it('every stdio entry runs node with absolute paths, never npx', () => {
    const stdio = blocks.flatMap(({ heading, json }) =>
      Object.values(json.mcpServers ?? json.servers ?? {})
        .filter(isStdio)
        .map((entry) => ({ heading, entry })),
    );
    expect(stdio.length).toBeGreaterThanOrEqual(3);
    for (const { heading, entry } of stdio) {
      expect(isAbsolute(entry.command), heading).toBe(true);
      expect(entry.command, heading).not.toMatch(/npx/);
      expect(entry.args?.[0] && isAbsolute(entry.args[0]), heading).toBe(true);
      expect(entry.args?.[0], heading).toMatch(/\/bin\/cloudops\.mjs$/);
      for (const [name, value] of Object.entries(entry.env ?? {}))
        if (name.endsWith('_FILE')) expect(isAbsolute(value), `${heading} ${name}`).toBe(true);
    }
  });

  it('never tells anyone to run `npx cloudops` (outside a checkout it would fetch whatever the registry has)', () => {
    const uses = doc.split('\n').filter((line) => /npx cloudops/.test(line) && !/never|not /i.test(line));
    expect(uses).toEqual([]);
  });
});
