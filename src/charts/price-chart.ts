/**
 * The price-history chart as an SVG string and the same facts in words (alt text). Pure: no fonts, no I/O; the
 * PNG comes from `render-png.ts`, which the digest loads only when it draws one.
 */

/** One digest (or one known price change) in a chart: each cluster's reference VM cost a month then. */
export interface ChartPoint {
  /** ISO 8601. */
  at: string;
  /** Cluster name → monthly cost as a decimal string; a cluster absent at that time has no entry. */
  costs: Record<string, string>;
}

export interface ChartInput {
  /** "Reference VM, monthly cost per cluster". */
  title: string;
  /** The reference VM in words, e.g. "2 vCores, 4 GB RAM, 50 GB disk". */
  subtitle: string;
  currency: string;
  /** Oldest first; the last point is now. */
  points: ChartPoint[];
  /** Whether to mark the cheapest cluster (not for one cluster alone). */
  markCheapest?: boolean;
}

/** What the chart shows, for the alt text and for tests. */
export interface ChartFacts {
  clusters: string[];
  cheapest: string[];
  changes: { cluster: string; before: number; after: number; percent: string }[];
  /** Clusters drawn; the rest are named in the alt text only. */
  drawn: string[];
}

export interface PriceChart {
  svg: string;
  alt: string;
  width: number;
  height: number;
  facts: ChartFacts;
}

/** The SVG's size in CSS pixels; the PNG is drawn at {@link PNG_ZOOM} times this. */
export const CHART_WIDTH = 800;
export const CHART_HEIGHT = 400;
/** At most this many lines: more are unreadable; the others are named in the alt text. */
export const MAX_LINES = 8;
/** Slack accepts longer alt text on image blocks, but files.getUploadURLExternal refuses very long `alt_txt`. */
export const MAX_ALT_CHARS = 1000;

/** Okabe–Ito: told apart by people with the common colour-vision deficiencies. */
const PALETTE = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#56B4E9', '#D55E00', '#000000', '#999999'];
const UP = '#B22222';
const DOWN = '#1B7F3B';
const FONT = 'DejaVu Sans';

const PLOT = { left: 70, right: 210, top: 70, bottom: 60 };
/** At most this many steps on the y axis, whatever the costs: the grid is drawn by counting, never by adding up. */
const MAX_TICKS = 10;

function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** Round steps (1, 2, 5 × 10ⁿ) so the axis reads 60, 65, 70 rather than 61.3, 64.9. */
function niceStep(range: number, ticks: number): number {
  const raw = range / ticks;
  const power = 10 ** Math.floor(Math.log10(raw));
  const unit = raw / power;
  return (unit <= 1 ? 1 : unit <= 2 ? 2 : unit <= 5 ? 5 : 10) * power;
}

function money(value: number): string {
  return value.toFixed(2);
}

/** "+4.2" / "-3.1": the change from `before` to `after`, one decimal. */
function percentText(before: number, after: number): string {
  if (before === 0) return after > 0 ? '+∞' : '0.0';
  const pct = ((after - before) / before) * 100;
  return `${pct > 0 ? '+' : ''}${pct.toFixed(1)}`;
}

function shortDate(iso: string): string {
  const d = new Date(iso);
  const month = d.toLocaleString('en-GB', { month: 'short', timeZone: 'UTC' });
  return `${d.getUTCDate()} ${month}`;
}

/** Moves labels apart (keeping their order) so that none is closer than `gap` to the next. */
function spread(ys: number[], gap: number, min: number, max: number): number[] {
  const order = ys.map((y, i) => ({ y, i })).sort((a, b) => a.y - b.y);
  for (let k = 1; k < order.length; k++) {
    const prev = order[k - 1];
    const cur = order[k];
    if (prev && cur && cur.y - prev.y < gap) cur.y = prev.y + gap;
  }
  const last = order.at(-1);
  if (last && last.y > max) {
    const shift = last.y - max;
    for (const o of order) o.y -= shift;
  }
  const first = order[0];
  if (first && first.y < min) {
    const shift = min - first.y;
    for (const o of order) o.y += shift;
  }
  const out = [...ys];
  for (const o of order) out[o.i] = o.y;
  return out;
}

/**
 * The input without costs that are not finite numbers ("1e400", "Infinity", text): such a cost is drawn as a gap, as
 * if the cluster was not listed then; kept, it would put NaN into every coordinate of the picture.
 */
function finiteOnly(input: ChartInput): ChartInput {
  const finite = (costs: Record<string, string>) =>
    Object.values(costs).every((cost) => Number.isFinite(Number(cost)))
      ? costs
      : Object.fromEntries(Object.entries(costs).filter(([, cost]) => Number.isFinite(Number(cost))));
  return { ...input, points: input.points.map((p) => ({ ...p, costs: finite(p.costs) })) };
}

/** The chart's facts: who is cheapest now, what changed at the last point, which lines are drawn. */
export function chartFacts(drawnFrom: ChartInput): ChartFacts {
  const input = finiteOnly(drawnFrom);
  const last = input.points.at(-1);
  const previous = input.points.at(-2);
  const names = [...new Set(input.points.flatMap((p) => Object.keys(p.costs)))].sort((a, b) =>
    a.localeCompare(b, 'en'),
  );
  const now = new Map(Object.entries(last?.costs ?? {}).map(([name, cost]) => [name, Number(cost)]));
  let lowest = Number.POSITIVE_INFINITY;
  for (const cost of now.values()) if (cost < lowest) lowest = cost;
  const cheapest =
    input.markCheapest === false ? [] : [...now].filter(([, cost]) => cost === lowest).map(([n]) => n);
  const changes: ChartFacts['changes'] = [];
  for (const [cluster, after] of now) {
    const was = previous?.costs[cluster];
    if (was === undefined) continue;
    const before = Number(was);
    if (before !== after) changes.push({ cluster, before, after, percent: percentText(before, after) });
  }
  changes.sort((a, b) => a.cluster.localeCompare(b.cluster, 'en'));
  // The cheapest and the changed first, then the cheapest of the rest, up to MAX_LINES.
  const rank = (name: string) =>
    (cheapest.includes(name) ? 0 : changes.some((c) => c.cluster === name) ? 1 : 2) * 1e12 +
    (now.get(name) ?? 1e11);
  const drawn = [...names].sort((a, b) => rank(a) - rank(b)).slice(0, MAX_LINES);
  drawn.sort((a, b) => a.localeCompare(b, 'en'));
  return { clusters: names, cheapest, changes, drawn };
}

/** The same facts as the picture, in words, for screen readers and for clients that show no images. */
export function chartAltText(drawnFrom: ChartInput, facts: ChartFacts = chartFacts(drawnFrom)): string {
  const input = finiteOnly(drawnFrom);
  const first = input.points[0];
  const last = input.points.at(-1);
  if (!first || !last) return `${input.title}: no prices recorded yet.`;
  const span =
    input.points.length === 1
      ? `on ${shortDate(last.at)}`
      : `over ${input.points.length} points from ${shortDate(first.at)} to ${shortDate(last.at)}`;
  const parts = [`${input.title} in ${input.currency} (${input.subtitle}), ${span}.`];
  if (facts.cheapest.length > 0) {
    const cost = last.costs[facts.cheapest[0] ?? ''];
    parts.push(`Cheapest now: ${facts.cheapest.join(', ')} at ${money(Number(cost))}.`);
  }
  if (facts.changes.length > 0) {
    const lines = facts.changes.map(
      (c) =>
        `${c.cluster} ${c.after > c.before ? 'up' : 'down'} ${c.percent.replace(/^[+-]/, '')}% from ${money(c.before)} to ${money(c.after)}`,
    );
    parts.push(`Latest changes: ${lines.join('; ')}.`);
  } else if (input.points.length > 1) {
    parts.push('No change since the previous point.');
  }
  const changed = new Set(facts.changes.map((c) => c.cluster));
  const others = Object.entries(last.costs)
    .filter(([name]) => !changed.has(name) && !facts.cheapest.includes(name))
    .sort(([a], [b]) => a.localeCompare(b, 'en'))
    .map(([name, cost]) => `${name} ${money(Number(cost))}`);
  if (others.length > 0) parts.push(`Others now: ${others.join(', ')}.`);
  const text = parts.join(' ');
  return text.length <= MAX_ALT_CHARS ? text : `${text.slice(0, MAX_ALT_CHARS - 1)}…`;
}

/** Draws the chart: one line per cluster over the points, the cheapest starred, the last changes labelled. */
export function priceChart(drawnFrom: ChartInput): PriceChart {
  const input = finiteOnly(drawnFrom);
  const facts = chartFacts(input);
  const width = CHART_WIDTH;
  const height = CHART_HEIGHT;
  const plotW = width - PLOT.left - PLOT.right;
  const plotH = height - PLOT.top - PLOT.bottom;
  const n = input.points.length;
  const values = input.points.flatMap((p) =>
    Object.entries(p.costs)
      .filter(([name]) => facts.drawn.includes(name))
      .map(([, cost]) => Number(cost)),
  );
  let lo = values.length > 0 ? Math.min(...values) : 0;
  let hi = values.length > 0 ? Math.max(...values) : 1;
  if (hi - lo < 1e-9) {
    const pad = Math.max(Math.abs(hi) * 0.05, 1);
    lo -= pad;
    hi += pad;
  }
  const step = niceStep(hi - lo, 4);
  lo = Math.floor(lo / step) * step;
  hi = Math.ceil(hi / step) * step;
  const x = (i: number) => PLOT.left + (n <= 1 ? plotW / 2 : (i * plotW) / (n - 1));
  const y = (v: number) => PLOT.top + plotH - ((v - lo) / (hi - lo)) * plotH;
  const f = (v: number) => v.toFixed(1);

  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="${FONT}">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="${PLOT.left}" y="26" font-size="17" font-weight="bold" fill="#1d1d1d">${esc(`${input.title} (${input.currency})`)}</text>`,
    `<text x="${PLOT.left}" y="46" font-size="12" fill="#555555">${esc(input.subtitle)}</text>`,
  );
  // Grid and y axis: counted ticks, never `v += step`, which stops changing v once step is below v's precision.
  const ticks = Math.min(MAX_TICKS, Math.round((hi - lo) / step));
  for (let k = 0; k <= ticks; k++) {
    const v = k === ticks ? hi : lo + k * step;
    const yy = f(y(v));
    out.push(
      `<line x1="${PLOT.left}" y1="${yy}" x2="${PLOT.left + plotW}" y2="${yy}" stroke="#e3e3e3" stroke-width="1"/>`,
      `<text x="${PLOT.left - 8}" y="${f(y(v) + 4)}" font-size="11" fill="#555555" text-anchor="end">${money(v)}</text>`,
    );
  }
  // X labels: at most about eight, always the first and the last.
  const every = Math.max(1, Math.ceil(n / 8));
  input.points.forEach((p, i) => {
    if (i % every !== 0 && i !== n - 1) return;
    if (i !== n - 1 && n - 1 - i < every) return;
    out.push(
      `<text x="${f(x(i))}" y="${height - PLOT.bottom + 18}" font-size="11" fill="#555555" text-anchor="middle">${esc(shortDate(p.at))}</text>`,
    );
  });
  out.push(
    `<line x1="${PLOT.left}" y1="${PLOT.top + plotH}" x2="${PLOT.left + plotW}" y2="${PLOT.top + plotH}" stroke="#888888" stroke-width="1"/>`,
  );

  const labels: { name: string; y: number; color: string; text: string; note?: string; up?: boolean }[] = [];
  facts.drawn.forEach((name, k) => {
    const color = PALETTE[k % PALETTE.length] ?? '#000000';
    const cheapest = facts.cheapest.includes(name);
    // Consecutive points where the cluster was listed form one stretch of line; a gap breaks it.
    let run: string[] = [];
    const runs: string[][] = [];
    input.points.forEach((p, i) => {
      const cost = p.costs[name];
      if (cost === undefined) {
        if (run.length > 0) runs.push(run);
        run = [];
        return;
      }
      run.push(`${f(x(i))},${f(y(Number(cost)))}`);
    });
    if (run.length > 0) runs.push(run);
    for (const r of runs) {
      if (r.length > 1)
        out.push(
          `<polyline points="${r.join(' ')}" fill="none" stroke="${color}" stroke-width="${cheapest ? 3.5 : 2}" stroke-linejoin="round"/>`,
        );
      for (const pt of r) {
        const [cx, cy] = pt.split(',');
        out.push(`<circle cx="${cx}" cy="${cy}" r="3" fill="${color}"/>`);
      }
    }
    const now = input.points.at(-1)?.costs[name];
    if (now === undefined) return;
    const change = facts.changes.find((c) => c.cluster === name);
    labels.push({
      name,
      y: y(Number(now)),
      color,
      text: `${cheapest ? '★ ' : ''}${name} ${money(Number(now))}`,
      note: change ? `${change.percent}%` : undefined,
      up: change ? change.after > change.before : undefined,
    });
    if (cheapest) {
      const cx = x(n - 1);
      const cy = y(Number(now));
      out.push(
        `<circle cx="${f(cx)}" cy="${f(cy)}" r="8" fill="none" stroke="${color}" stroke-width="2.5"/>`,
      );
    }
  });
  const ys = spread(
    labels.map((l) => l.y),
    16,
    PLOT.top,
    PLOT.top + plotH,
  );
  const lx = PLOT.left + plotW + 14;
  labels.forEach((l, i) => {
    const ly = ys[i] ?? l.y;
    const weight = l.text.startsWith('★') ? ' font-weight="bold"' : '';
    out.push(
      `<text x="${lx}" y="${f(ly + 4)}" font-size="12" fill="${l.color}"${weight}>${esc(l.text)}${
        l.note
          ? ` <tspan fill="${l.up ? UP : DOWN}" font-weight="bold">${l.up ? '▲' : '▼'} ${esc(l.note)}</tspan>`
          : ''
      }</text>`,
    );
  });
  const hidden = facts.clusters.length - facts.drawn.length;
  const foot = [
    facts.cheapest.length > 0 ? '★ cheapest now' : '',
    facts.changes.length > 0 ? '▲▼ changed since the previous point' : '',
    hidden > 0 ? `${hidden} more cluster${hidden === 1 ? '' : 's'} in the text` : '',
  ].filter(Boolean);
  if (foot.length > 0)
    out.push(
      `<text x="${width - 12}" y="${height - 10}" font-size="11" fill="#555555" text-anchor="end">${esc(foot.join(' · '))}</text>`,
    );
  out.push('</svg>');
  return { svg: out.join(''), alt: chartAltText(input, facts), width, height, facts };
}
