import { describe, expect, it } from 'vitest';
import { requestEntry } from '../../src/requests/audit/entry.ts';
import { canonicalJson } from '../../src/requests/model/canonical-json.ts';
import { resizeRequest } from '../fixtures/requests.ts';

// The audit chains and the decision seals already stored were made with the two forms this one replaces: the same
// value must give the same text, byte for byte, or every stored hash and seal would stop holding.

/** The audit chain's form before. */
function chainForm(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((item) => chainForm(item ?? null)).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${chainForm(v)}`).join(',')}}`;
}

/** The decision seal's form before. */
function sealForm(value: unknown): string {
  return (
    JSON.stringify(value, (_key, member: unknown) => {
      if (member === null || typeof member !== 'object' || Array.isArray(member)) return member;
      const record = member as Record<string, unknown>;
      const sorted: Record<string, unknown> = {};
      for (const key of Object.keys(record).sort()) sorted[key] = record[key];
      return sorted;
    }) ?? 'null'
  );
}

/** A deterministic stream of JSON-like values (a tiny LCG, so a failure can be replayed). */
function values(seed: number, count: number): unknown[] {
  let state = seed;
  const next = () => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state / 2 ** 31;
  };
  const keys = ['a', 'b', 'Z', '_', 'é', '10', '2', 'ä', 'aa', '', 'key "q"', '\u2028', '😀'];
  const make = (depth: number): unknown => {
    const pick = next();
    if (depth > 3 || pick < 0.35) {
      const leaf = [null, true, false, 0, -1.5, 1e21, 'x', 'line\nbreak', '"', 'ü', undefined][
        Math.floor(next() * 11)
      ];
      return leaf;
    }
    if (pick < 0.6) return Array.from({ length: Math.floor(next() * 4) }, () => make(depth + 1));
    const record: Record<string, unknown> = {};
    for (let i = Math.floor(next() * 6); i > 0; i--)
      record[keys[Math.floor(next() * keys.length)] ?? 'k'] = make(depth + 1);
    return record;
  };
  return Array.from({ length: count }, () => make(0));
}

describe('canonical JSON', () => {
  it('gives the text of both forms it replaces for any JSON value, keys in any order', () => {
    for (const value of values(7, 3000)) {
      const text = canonicalJson(value);
      expect(text).toBe(chainForm(value));
      // The seal's form put keys that read as array indexes first, as JavaScript orders an object's keys; no sealed
      // structure has such keys (their names are the bot's own), and on all others the forms agree.
      if (value !== undefined && !JSON.stringify(value).match(/"\d+":/)) expect(text).toBe(sealForm(value));
    }
  });

  it('gives the same text for an audit entry as built and as read back from its JSON', () => {
    const request = { ...resizeRequest({ target: { cores: 6 } }), id: 'R7K2M9QX', outcomes: [] } as never;
    const entry = {
      ...requestEntry(request, { act: 'queued', actor: 'cloudops' }, '2026-12-07T05:00:00.000Z', null),
      prev: '',
    };
    expect(canonicalJson(entry)).toBe(chainForm(entry));
    expect(canonicalJson(JSON.parse(JSON.stringify(entry)))).toBe(chainForm(entry));
  });
});
