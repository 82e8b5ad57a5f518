import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CHART_WIDTH, type ChartPoint, priceChart } from '../../src/charts/price-chart.ts';
import { PNG_ZOOM, renderPixels, renderPng } from '../../src/charts/render-png.ts';
import { decodePng, PNG_SIGNATURE, pixelDiff, pngHeader } from '../helpers/png.ts';

const root = resolve(import.meta.dirname, '..', '..');
const REFERENCE = join(root, 'test', 'fixtures', 'charts', 'history-a.png');
/** Set to rewrite the reference picture after a deliberate change of the drawing. */
const UPDATE = process.env.UPDATE_CHART_FIXTURES === '1';

const DAYS = ['2026-11-21', '2026-11-22', '2026-11-23', '2026-11-24', '2026-11-25', '2026-11-26'];

/** Six digests of four clusters: fra-1 went up at the last one; lon-4 appeared at the third. */
function history(amsNow: string): ChartPoint[] {
  return DAYS.map((day, i) => ({
    at: `${day}T08:00:00.000Z`,
    costs: {
      'fra-1': i === DAYS.length - 1 ? '66.42' : '64.32',
      'ams-2': i === DAYS.length - 1 ? amsNow : '63.50',
      'par-3': '70.08',
      ...(i >= 2 ? { 'lon-4': '58.40' } : {}),
    },
  }));
}

const input = (points: ChartPoint[]) => ({
  title: 'Reference VM, monthly cost per cluster',
  subtitle: '2 vCores (regular), 4 GB RAM, 50 GB disk, public IP · 730 h a month',
  currency: 'EUR',
  points,
});

/** A: ams-2 unchanged at the last digest; B: the same history except ams-2 fell from 63.50 to 61.00. */
const A = input(history('63.50'));
const B = input(history('61.00'));

describe('the price chart as a PNG', () => {
  it('is a PNG of 1200 × 600 RGBA pixels, of a size Slack shows at once', async () => {
    const { png, width, height } = await renderPng(priceChart(A).svg);
    expect(png.subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);
    const header = pngHeader(png);
    expect(header).toMatchObject({ width: 1200, height: 600, bitDepth: 8 });
    expect([2, 6]).toContain(header.colorType);
    expect({ width, height }).toEqual({ width: 1200, height: 600 });
    expect(png.length).toBeGreaterThan(10_000);
    expect(png.length).toBeLessThan(150_000);
    // The file holds the picture resvg drew, pixel for pixel.
    expect(pixelDiff(decodePng(png), renderPixels(priceChart(A).svg), 0).count).toBe(0);
  });

  it('draws history A as the reference picture does (within a small tolerance)', async () => {
    const drawn = renderPixels(priceChart(A).svg);
    if (UPDATE || !existsSync(REFERENCE)) writeFileSync(REFERENCE, (await renderPng(priceChart(A).svg)).png);
    const reference = decodePng(readFileSync(REFERENCE));
    // Same resvg and the shipped font draw the same pixels; the tolerance allows anti-aliasing noise only.
    expect(pixelDiff(drawn, reference).count).toBeLessThan(150);
    // A price 2.50 lower at one point is well beyond that tolerance.
    expect(pixelDiff(renderPixels(priceChart(B).svg), reference).count).toBeGreaterThan(1000);
  });

  it('changes the picture only where the prices changed: the last step of ams-2 and its label', () => {
    const a = renderPixels(priceChart(A).svg);
    const b = renderPixels(priceChart(B).svg);
    const diff = pixelDiff(a, b);
    expect(diff.count).toBeGreaterThan(200);
    // The second-to-last digest sits at x(n-2); everything left of it (the first four digests, the axis) is the same.
    const plotWidth = CHART_WIDTH - 70 - 210;
    const secondToLast = (70 + ((DAYS.length - 2) * plotWidth) / (DAYS.length - 1)) * PNG_ZOOM;
    expect(diff.box?.x0).toBeGreaterThanOrEqual(secondToLast - 6);
    // ...and the change is between the old and the new price's height, not on the other lines.
    const top = 70 * PNG_ZOOM;
    expect(diff.box?.y0).toBeGreaterThan(top);
  });

  it('says in words what it shows: the cheapest, the latest changes, the others', () => {
    const chart = priceChart(B);
    expect(chart.facts.cheapest).toEqual(['lon-4']);
    expect(chart.facts.changes.map((c) => [c.cluster, c.percent])).toEqual([
      ['ams-2', '-3.9'],
      ['fra-1', '+3.3'],
    ]);
    expect(chart.alt).toContain('Cheapest now: lon-4 at 58.40.');
    expect(chart.alt).toContain('ams-2 down 3.9% from 63.50 to 61.00');
    expect(chart.alt).toContain('fra-1 up 3.3% from 64.32 to 66.42');
    expect(chart.alt).toContain('Others now: par-3 70.08.');
    expect(chart.alt.length).toBeLessThanOrEqual(1000);
  });

  it('marks no cheapest when told not to, and draws one point without failing', async () => {
    const one = input([{ at: '2026-11-26T08:00:00.000Z', costs: { 'fra-1': '61.32' } }]);
    const chart = priceChart({ ...one, markCheapest: false });
    expect(chart.facts.cheapest).toEqual([]);
    expect(pngHeader((await renderPng(chart.svg)).png).width).toBe(1200);
  });

  it('escapes what it writes into the SVG', () => {
    const odd = input([{ at: '2026-11-26T08:00:00.000Z', costs: { 'a<b&c': '1.00' } }]);
    expect(priceChart(odd).svg).toContain('a&lt;b&amp;c');
  });
});

describe('only the charts load the renderer', () => {
  it('no module outside src/charts/ imports resvg or the drawing modules statically', () => {
    const files = (dir: string): string[] =>
      readdirSync(dir).flatMap((name) => {
        const full = join(dir, name);
        return statSync(full).isDirectory() ? files(full) : full.endsWith('.ts') ? [full] : [];
      });
    for (const file of files(join(root, 'src'))) {
      const path = relative(root, file);
      if (path.startsWith('src/charts/')) continue;
      const text = readFileSync(file, 'utf8');
      expect(text, path).not.toMatch(
        /^\s*import\s[^;]*from\s+['"](@resvg\/resvg-js|[./]+charts\/(draw|render-png)\.ts)['"]/m,
      );
    }
  });
});
