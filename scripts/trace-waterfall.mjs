// Draws one trace as a waterfall (SVG) from spans a test captured, for docs/tracing.md:
//   CLOUDOPS_TRACE_CAPTURE=docs/images/trace-approved-resize.json npx vitest run test/integration/ops-tracing.test.ts -t "one approved"
//   node scripts/trace-waterfall.mjs docs/images/trace-approved-resize.json docs/images/trace-approved-resize.svg
// Rows follow the span tree (children under their parent, by start time); bars are to scale.
import { readFileSync, writeFileSync } from 'node:fs';

const [input, output] = process.argv.slice(2);
if (!input || !output) {
  process.stderr.write('usage: node scripts/trace-waterfall.mjs <captured spans.json> <out.svg>\n');
  process.exit(2);
}
const spans = JSON.parse(readFileSync(input, 'utf8'));
const start = (s) => BigInt(s.startNs);
const end = (s) => BigInt(s.endNs);
const ids = new Set(spans.map((s) => s.spanId));
const children = new Map();
for (const span of spans) {
  const parent = span.parentSpanId && ids.has(span.parentSpanId) ? span.parentSpanId : 'root';
  children.set(parent, [...(children.get(parent) ?? []), span]);
}
const rows = [];
const walk = (parent, depth) => {
  const list = (children.get(parent) ?? []).toSorted((a, b) => (start(a) < start(b) ? -1 : 1));
  for (const span of list) {
    rows.push({ span, depth });
    walk(span.spanId, depth + 1);
  }
};
walk('root', 0);

const t0 = spans.reduce((min, s) => (start(s) < min ? start(s) : min), start(spans[0]));
const t1 = spans.reduce((max, s) => (end(s) > max ? end(s) : max), end(spans[0]));
const ms = (ns) => Number(ns) / 1e6;
const total = ms(t1 - t0);

// Kinds as OTLP numbers them: 1 internal, 2 server, 3 client, 4 producer, 5 consumer.
const COLORS = { 1: '#8e6fd8', 2: '#2f7ed8', 3: '#e07b39', 4: '#3aa657', 5: '#2c9c9c' };
const KIND = { 1: 'internal', 2: 'server', 3: 'client', 4: 'producer', 5: 'consumer' };
const W = 1100;
const LABEL = 400;
const ROW = 24;
const TOP = 56;
const PLOT = W - LABEL - 90;
const H = TOP + rows.length * ROW + 60;
const x = (ns) => LABEL + (ms(ns - t0) / total) * PLOT;
const esc = (text) => String(text).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
/** The VM path is long (the project's UUID): shortened for the picture, the VM id kept. */
const label = (name) => name.replace(/\/project\/[0-9a-f-]{36}\//, '/project/{uuid}/');

const step = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000].find((s) => total / s <= 10) ?? 1000;
const ticks = [];
for (let t = 0; t <= total; t += step) ticks.push(t);

const parts = [
  `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="Helvetica, Arial, sans-serif" font-size="12">`,
  `<title>A waterfall of one trace: ${rows.length} spans, each a bar from its start to its end, children under their parent</title>`,
  `<rect width="${W}" height="${H}" fill="#ffffff"/>`,
  `<text x="12" y="22" font-size="15" font-weight="bold">One approved resize: the trace of the approve click (${rows.length} spans, ${total.toFixed(0)} ms)</text>`,
  `<text x="12" y="40" fill="#555">request ${esc(rows.find((r) => r.span.attributes?.['cloudops.request_id'])?.span.attributes['cloudops.request_id'] ?? '')} · captured by test/integration/ops-tracing.test.ts from the bot's OTLP export</text>`,
];
for (const t of ticks) {
  const px = LABEL + (t / total) * PLOT;
  parts.push(
    `<line x1="${px}" y1="${TOP - 4}" x2="${px}" y2="${TOP + rows.length * ROW}" stroke="#e4e4e4"/>`,
  );
  parts.push(
    `<text x="${px}" y="${TOP + rows.length * ROW + 16}" text-anchor="middle" fill="#555">${t} ms</text>`,
  );
}
rows.forEach(({ span, depth }, i) => {
  const y = TOP + i * ROW;
  if (i % 2 === 0)
    parts.push(`<rect x="0" y="${y}" width="${W}" height="${ROW}" fill="#f7f7f9" opacity="0.6"/>`);
  const x0 = x(start(span));
  const width = Math.max(2, x(end(span)) - x0);
  const color = COLORS[span.kind] ?? '#888';
  const duration = ms(end(span) - start(span));
  parts.push(
    `<text x="${12 + depth * 14}" y="${y + 16}"${depth === 0 ? ' font-weight="bold"' : ''}>${esc(label(span.name))}</text>`,
    `<rect x="${x0}" y="${y + 5}" width="${width}" height="${ROW - 10}" rx="2" fill="${color}"><title>${esc(span.name)} (${KIND[span.kind]}) ${duration.toFixed(2)} ms</title></rect>`,
    `<text x="${x0 + width + 4}" y="${y + 16}" fill="#333">${duration < 10 ? duration.toFixed(1) : duration.toFixed(0)} ms</text>`,
  );
});
let lx = 12;
const ly = H - 18;
for (const [kind, name] of Object.entries(KIND)) {
  parts.push(
    `<rect x="${lx}" y="${ly - 10}" width="12" height="12" fill="${COLORS[kind]}"/>`,
    `<text x="${lx + 16}" y="${ly}">${name}</text>`,
  );
  lx += 100;
}
parts.push('</svg>');
writeFileSync(output, `${parts.join('\n')}\n`);
process.stdout.write(`${output}: ${rows.length} spans, ${total.toFixed(1)} ms\n`);
