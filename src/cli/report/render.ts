/**
 * `cloudops report` as CSV and as one self-contained HTML file (docs/operations.md#report): inline CSS and an inline
 * SVG chart, no script, no font, no image, no link out, so it opens the same offline and in an auditor's archive.
 */
import type { ReportRow, ReportSummary } from './rows.ts';

/** The columns, as the CSV's header and the HTML table's. */
export const COLUMNS: readonly [keyof ReportRow, string][] = [
  ['when', 'When (UTC)'],
  ['request', 'Request'],
  ['project', 'Project'],
  ['vm', 'VM'],
  ['change', 'Change'],
  ['costDelta', 'Monthly cost difference'],
  ['requester', 'Requester'],
  ['approvers', 'Approvers'],
  ['methods', 'Methods'],
  ['breakGlassBy', 'Break glass'],
  ['ticket', 'Ticket'],
  ['rule', 'Rule'],
  ['outcome', 'Outcome'],
  ['policyVersion', 'Policy version'],
];

/**
 * A CSV cell (RFC 4180): quoted when it holds a comma, quote or line break; a cell a spreadsheet would read as a
 * formula (=, +, -, @, tab, CR first) gets a leading apostrophe, so a reason typed in Slack cannot run in Excel.
 */
export function csvCell(value: unknown): string {
  let text = value === null || value === undefined ? '' : String(value);
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** The rows as CSV: a header, then one line per request (CRLF, as RFC 4180 writes it). */
export function reportCsv(rows: ReportRow[]): string {
  const lines = [COLUMNS.map(([, title]) => csvCell(title)).join(',')];
  for (const row of rows) lines.push(COLUMNS.map(([key]) => csvCell(row[key])).join(','));
  return `${lines.join('\r\n')}\r\n`;
}

/** Text for HTML: every character that could open markup escaped. */
export function escapeHtml(value: unknown): string {
  return String(value ?? '')
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&#39;');
}

/** Colours for the chart's projects, told apart in print too (the legend names each). */
const PALETTE = ['#1f6feb', '#d97706', '#059669', '#b91c1c', '#7c3aed', '#0e7490', '#a16207', '#be185d'];

/** Changes per week and project as a stacked bar chart, in SVG with its own title for screen readers. */
export function weeklyChart(perWeek: ReportSummary['perWeek']): string {
  const weeks = [...new Set(perWeek.map((p) => p.week))];
  const projects = [...new Set(perWeek.map((p) => p.project))].sort();
  if (weeks.length === 0) return '<p class="muted">No requests in this period.</p>';
  const totals = weeks.map((week) => perWeek.filter((p) => p.week === week).reduce((n, p) => n + p.count, 0));
  const max = Math.max(...totals);
  const [left, top, height, bar, gap] = [40, 10, 180, 36, 18];
  const width = left + weeks.length * (bar + gap) + 10;
  const scale = (n: number) => (n / max) * height;
  const parts: string[] = [];
  for (let tick = 0; tick <= max; tick += Math.max(1, Math.ceil(max / 5))) {
    const y = top + height - scale(tick);
    parts.push(
      `<line x1="${left - 4}" x2="${width}" y1="${y}" y2="${y}" class="grid"/>`,
      `<text x="${left - 8}" y="${y + 4}" text-anchor="end">${tick}</text>`,
    );
  }
  weeks.forEach((week, i) => {
    const x = left + gap / 2 + i * (bar + gap);
    let y = top + height;
    for (const [p, project] of projects.entries()) {
      const count = perWeek.find((c) => c.week === week && c.project === project)?.count ?? 0;
      if (count === 0) continue;
      const h = scale(count);
      y -= h;
      parts.push(
        `<rect x="${x}" y="${y}" width="${bar}" height="${h}" fill="${PALETTE[p % PALETTE.length]}"><title>${escapeHtml(`${project}, week of ${week}: ${count}`)}</title></rect>`,
      );
    }
    parts.push(
      `<text x="${x + bar / 2}" y="${top + height + 16}" text-anchor="middle">${escapeHtml(week.slice(5))}</text>`,
    );
  });
  const legend = projects
    .map(
      (project, p) =>
        `<span class="key"><i style="background:${PALETTE[p % PALETTE.length]}"></i>${escapeHtml(project)}</span>`,
    )
    .join(' ');
  return `<svg xmlns="http://www.w3.org/2000/svg" role="img" width="${width}" height="${top + height + 24}" viewBox="0 0 ${width} ${top + height + 24}"><title>Changes per week and project</title>${parts.join('')}</svg><div class="legend">${legend}</div>`;
}

const STYLE = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;margin:32px;max-width:1400px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}
.muted{color:#59636e}.cards{display:flex;gap:12px;flex-wrap:wrap;margin:16px 0}
.card{border:1px solid #d1d9e0;border-radius:8px;padding:10px 14px;min-width:150px}
.card b{display:block;font-size:22px}.ok{color:#1a7f37}.bad{color:#cf222e}
table{border-collapse:collapse;width:100%;font-size:12px}th,td{border-bottom:1px solid #d1d9e0;padding:5px 6px;text-align:left;vertical-align:top}
th{background:#f6f8fa;position:sticky;top:0}tr.refused td{background:#fff5f5}tr.glass td{background:#fff8e6}
svg text{font-size:11px;fill:#59636e}svg .grid{stroke:#eaeef2}.legend{font-size:12px;margin-top:4px}
.key{margin-right:12px}.key i{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}
@media print{body{margin:12mm}th{position:static}}`;

/** What the HTML says of the chain's check. */
export interface ChainResult {
  ok: boolean;
  text: string;
}

function card(label: string, value: string, cls = ''): string {
  return `<div class="card"><span class="muted">${escapeHtml(label)}</span><b class="${cls}">${escapeHtml(value)}</b></div>`;
}

function rowHtml(row: ReportRow): string {
  const cls = row.breakGlass
    ? 'glass'
    : ['rejected', 'refused', 'resolved_failed'].includes(row.state)
      ? 'refused'
      : '';
  // The time as a person reads it; the CSV and JSON keep the ISO form.
  const shown = (key: keyof ReportRow) =>
    key === 'when' ? `${row.when.slice(0, 10)} ${row.when.slice(11, 16)}` : row[key];
  const cells = COLUMNS.map(([key]) => `<td>${escapeHtml(shown(key))}</td>`).join('');
  return `<tr${cls ? ` class="${cls}"` : ''}>${cells}</tr>`;
}

/** The report as one HTML file. */
export function reportHtml(
  rows: ReportRow[],
  summary: ReportSummary,
  meta: { from: string; to: string; project?: string; generatedAt: string; chain: ChainResult },
): string {
  const share =
    summary.approvals === 0
      ? 'no approvals'
      : `${Math.round((summary.verifiedApprovals / summary.approvals) * 100)} %`;
  const scope = meta.project ? `project ${meta.project}` : 'all projects';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>cloudops changes ${escapeHtml(meta.from)} to ${escapeHtml(meta.to)}</title><style>${STYLE}</style></head><body>
<h1>Infrastructure changes requested through cloudops</h1>
<p class="muted">${escapeHtml(meta.from)} to ${escapeHtml(meta.to)} (inclusive, UTC), ${escapeHtml(scope)}. Generated ${escapeHtml(meta.generatedAt)} from the audit chain.</p>
<div class="cards">
${card('Requests', String(summary.requests))}
${card('Rejected by an approver', String(summary.rejected))}
${card('Refused (rules or API)', String(summary.refused))}
${card('Break glass', String(summary.breakGlass), summary.breakGlass > 0 ? 'bad' : '')}
${card('Verified approvals', `${share}`)}
${card('Audit chain', meta.chain.ok ? 'verified' : 'BROKEN', meta.chain.ok ? 'ok' : 'bad')}
</div>
<p class="${meta.chain.ok ? 'muted' : 'bad'}">${escapeHtml(meta.chain.text)}</p>
<p class="muted">Verified approvals: ${summary.verifiedApprovals} of ${summary.approvals} approvals were proved with a passkey or the company's SSO; the rest were a click in Slack.</p>
<h2>Changes per week and project</h2>
${weeklyChart(summary.perWeek)}
<h2>Every request</h2>
<table><thead><tr>${COLUMNS.map(([, title]) => `<th>${escapeHtml(title)}</th>`).join('')}</tr></thead>
<tbody>
${rows.map(rowHtml).join('\n')}
</tbody></table>
</body></html>
`;
}
