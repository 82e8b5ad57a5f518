/**
 * Draws a price chart to PNG. Loaded with `import()` by whoever draws one (the digest worker, `/cloud cluster`),
 * so roles that never draw never load resvg.
 */
import { type ChartInput, priceChart } from './price-chart.ts';
import { renderPng } from './render-png.ts';

/** A chart ready to upload. */
export interface DrawnChart {
  png: Buffer;
  width: number;
  height: number;
  alt: string;
  facts: ReturnType<typeof priceChart>['facts'];
}

/** Pictures kept by their SVG: channels on the same schedule see the same history, so most digests draw nothing. */
const CACHE_SIZE = 16;
const cache = new Map<string, Buffer>();

/** The chart of `input` as a PNG, with its alt text. */
export async function drawChart(input: ChartInput): Promise<DrawnChart> {
  const chart = priceChart(input);
  let png = cache.get(chart.svg);
  if (png) {
    cache.delete(chart.svg);
  } else {
    png = (await renderPng(chart.svg)).png;
  }
  cache.set(chart.svg, png);
  const oldest = cache.keys().next();
  if (cache.size > CACHE_SIZE && !oldest.done) cache.delete(oldest.value);
  return { png, width: chart.width, height: chart.height, alt: chart.alt, facts: chart.facts };
}
