import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '..', '..');

/**
 * Draws a chart in a child process with a deadline: a drawing loop that never ends blocks the thread it runs in, so
 * the test cannot time it out from inside; the child is killed instead and the test reads what it printed.
 */
function drawInChild(costs: Record<string, string>[]): { status: number | null; svg: string } {
  const points = costs.map((c, i) => ({ at: `2026-11-2${i + 1}T08:00:00.000Z`, costs: c }));
  const script = `
    import { priceChart } from ${JSON.stringify(resolve(root, 'src/charts/price-chart.ts'))};
    const chart = priceChart({ title: 'Reference VM', subtitle: 'sub', currency: 'EUR', points: ${JSON.stringify(points)} });
    process.stdout.write(chart.svg);
  `;
  const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: root,
    encoding: 'utf8',
    timeout: 60_000,
    killSignal: 'SIGKILL',
  });
  return { status: run.status, svg: run.stdout };
}

const gridLines = (svg: string) => (svg.match(/stroke="#e3e3e3"/g) ?? []).length;

describe('the price chart with costs far outside a monthly price', () => {
  it('draws two clusters 2 apart at about 1e16 a month without hanging, with a bounded grid', () => {
    const drawn = drawInChild([
      { a: '10000000000000000', b: '10000000000000002' },
      { a: '10000000000000000', b: '10000000000000002' },
    ]);
    expect(drawn.status).toBe(0);
    expect(drawn.svg).toContain('</svg>');
    expect(gridLines(drawn.svg)).toBeGreaterThan(0);
    expect(gridLines(drawn.svg)).toBeLessThanOrEqual(12);
    expect(drawn.svg).not.toContain('NaN');
  });

  it('draws costs that are not finite numbers without NaN coordinates', () => {
    const drawn = drawInChild([
      { a: '1e400', b: '12.00' },
      { a: 'Infinity', b: '13.00' },
    ]);
    expect(drawn.status).toBe(0);
    expect(drawn.svg).not.toContain('NaN');
    expect(drawn.svg).not.toContain('Infinity');
  });

  it('keeps the ordinary axis: 60 to 70 a month in round steps', () => {
    const drawn = drawInChild([
      { a: '61.30', b: '64.90' },
      { a: '62.00', b: '69.10' },
    ]);
    expect(drawn.status).toBe(0);
    expect(drawn.svg).toContain('>60.00<');
    expect(drawn.svg).toContain('>70.00<');
  });
});
