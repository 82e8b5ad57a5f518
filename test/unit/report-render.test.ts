import { describe, expect, it } from 'vitest';
import { csvCell, reportCsv, reportHtml, weeklyChart } from '../../src/cli/report/render.ts';
import { type ReportRow, reportSummary, weekOf } from '../../src/cli/report/rows.ts';

// What people type reaches the report (a rejection's reason, a project name): it must not run in a spreadsheet or a
// browser (docs/operations.md#report).
const row = (over: Partial<ReportRow>): ReportRow => ({
  when: '2026-11-17T09:30:00.000Z',
  request: 'R0000001',
  project: 'shop-prod',
  projectId: '0b6f',
  vm: 101,
  change: 'cores 2 → 4',
  costDelta: '17.52 EUR',
  requester: 'U0DEV',
  approvers: '',
  methods: '',
  ticket: '',
  rule: 'the default',
  outcome: 'pending',
  state: 'pending',
  breakGlass: false,
  breakGlassBy: '',
  approvals: 0,
  verified: 0,
  policyVersion: 'a8c366c22b7c',
  ...over,
});

describe('the report against hostile text', () => {
  it('defuses formulas and quotes cells in the CSV', () => {
    expect(csvCell('=HYPERLINK("http://evil","x")')).toBe('"\'=HYPERLINK(""http://evil"",""x"")"');
    for (const lead of ['+', '-', '@', '\t', '\r'])
      expect(csvCell(`${lead}1`).replace(/^"/, '')).toMatch(/^'/);
    expect(csvCell('a,b')).toBe('"a,b"');
    expect(csvCell('line\nbreak')).toBe('"line\nbreak"');
    const csv = reportCsv([row({ ticket: "=cmd|' /C calc'!A0" })]);
    expect(csv.split('\r\n')[1]).toContain(",'=cmd|' /C calc'!A0,");
  });

  it('escapes markup in the HTML, so a typed <script> or an attribute break stays text', () => {
    const hostile = row({
      outcome: 'rejected by U0LEAD: <script>alert(1)</script>"><img src=x onerror=alert(2)>',
    });
    const html = reportHtml([hostile], reportSummary([hostile]), {
      from: '2026-11-16',
      to: '2026-11-22',
      project: '<b>p</b>',
      generatedAt: '2026-12-07T00:00:00.000Z',
      chain: { ok: true, text: 'ok' },
    });
    expect(html).not.toMatch(/<script|<img|onerror=alert\(2\)>/);
    expect(html).toContain(
      '&lt;script&gt;alert(1)&lt;/script&gt;&quot;&gt;&lt;img src=x onerror=alert(2)&gt;',
    );
    expect(html).toContain('project &lt;b&gt;p&lt;/b&gt;');
    expect(weeklyChart([{ week: '2026-11-16', project: '</title><script>', count: 1 }])).not.toContain(
      '<script>',
    );
  });

  it('counts weeks from Monday, UTC', () => {
    expect(weekOf('2026-11-16T00:00:00Z')).toBe('2026-11-16');
    expect(weekOf('2026-11-22T23:59:59Z')).toBe('2026-11-16');
    expect(weekOf('2026-11-23T00:00:00Z')).toBe('2026-11-23');
  });
});
