/** One printed row: a scenario/variant label and its figures. */
export interface Row {
  scenario: string;
  target: string;
  figures: Record<string, number | string | boolean>;
}

const show = (v: number | string | boolean | undefined): string => {
  if (v === undefined) return '';
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) return '-';
    return Number.isInteger(v) ? String(v) : v.toFixed(1);
  }
  return String(v);
};

/** Renders rows as a plain-text table; columns are the union of every row's figure names, in first-seen order. */
export function renderTable(rows: readonly Row[], labels: [string, string] = ['scenario', 'target']): string {
  const columns: string[] = [];
  for (const row of rows)
    for (const key of Object.keys(row.figures)) if (!columns.includes(key)) columns.push(key);
  const header = [...labels, ...columns];
  const body = rows.map((r) => [r.scenario, r.target, ...columns.map((c) => show(r.figures[c]))]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((line) => line[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}
