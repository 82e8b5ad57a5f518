/**
 * Canonical JSON: object keys sorted (by UTF-16 code units, as `Array.prototype.sort` orders strings) at every depth,
 * no whitespace, `undefined` members left out and `undefined` array items written as null, as JSON.stringify does.
 * One text per value, whatever order its fields were written in: what the audit chain hashes and what a decision's
 * seal covers (the stored request is JSON edited by Lua and by hand). Pure.
 *
 * Written as a loop that appends to one string, and sorting only keys that are out of order (the bot builds its
 * entries in order): it runs for every audit entry and every seal, several times per approved request, and the
 * general form (Object.entries, sort, map, join at each level) took three times as long.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) out += (i === 0 ? '' : ',') + canonicalJson(value[i] ?? null);
    return `${out}]`;
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  if (!inOrder(keys)) keys.sort();
  let out = '{';
  for (const key of keys) {
    const member = record[key];
    if (member === undefined) continue;
    out += `${out.length === 1 ? '' : ','}${JSON.stringify(key)}:${canonicalJson(member)}`;
  }
  return `${out}}`;
}

function inOrder(keys: string[]): boolean {
  for (let i = 1; i < keys.length; i++) if ((keys[i - 1] as string) > (keys[i] as string)) return false;
  return true;
}
