import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../bench/lib/config.ts';
import { median, medianOf, percentile, summarizeLatencies } from '../../bench/lib/stats.ts';
import { renderTable } from '../../bench/lib/table.ts';

describe('bench stats', () => {
  it('takes nearest-rank percentiles of a sorted array', () => {
    const values = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(values, 50)).toBe(50);
    expect(percentile(values, 99)).toBe(99);
    expect(percentile(values, 100)).toBe(100);
    expect(percentile([7], 99)).toBe(7);
    expect(percentile([], 50)).toBeNaN();
  });

  it('takes the median of odd and even counts, unsorted', () => {
    expect(median([5, 1, 3])).toBe(3);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([])).toBeNaN();
  });

  it('summarizes latencies with the count over 3 s and passes errors through', () => {
    const summary = summarizeLatencies([3001, 10, 20, 2999, 5000], 2);
    expect(summary).toEqual({ count: 5, p50: 2999, p99: 5000, max: 5000, over3s: 2, errors: 2 });
  });

  it('takes each figure’s own median across runs', () => {
    const runs = [
      { p50: 10, p99: 100 },
      { p50: 30, p99: 50 },
      { p50: 20, p99: 70 },
    ];
    expect(medianOf(runs)).toEqual({ p50: 20, p99: 70 });
    expect(() => medianOf([])).toThrow(/at least one run/);
  });

  it('renders one column per figure and leaves a row’s missing figures blank', () => {
    const table = renderTable([
      { scenario: 'a', target: 'cloudops', figures: { p50_ms: 1.25, errors: 0 } },
      { scenario: 'a', target: 'bare', figures: { p50_ms: Number.NaN } },
    ]);
    const lines = table.split('\n');
    expect(lines[0]).toMatch(/^scenario\s+target\s+p50_ms\s+errors$/);
    expect(lines[2]).toMatch(/cloudops\s+1\.3\s+0$/);
    expect(lines[3]).toMatch(/bare\s+-\s*$/);
  });
});

describe('bench config', () => {
  it('uses the brief’s sizes by default and small ones with --quick', () => {
    const full = parseConfig([], {});
    expect(full.runs).toBe(3);
    expect(full.ack).toMatchObject({ rates: [100, 400], durationMs: 8000, burst: 1000 });
    expect(full.pipeline.requests).toBe(5000);
    expect(full.fairness).toMatchObject({ requests: 1000, vms: 10 });
    expect(full.digest.channels).toBe(500);
    const quick = parseConfig(['--quick'], {});
    expect(quick.runs).toBe(1);
    expect(quick.pipeline.requests).toBe(200);
    // Every ratio of issue 15 comes from at least 5 interleaved pairs, in a full run and a quick one.
    expect(full.pairs).toBe(5);
    expect(quick.pairs).toBe(5);
    expect(full.latency).toMatchObject({ clicks: 100, perSecond: 10 });
    expect(full.workers).toMatchObject({ requests: 1000, latencyMs: 20 });
  });

  it('takes flags and BENCH_* variables, and refuses unknown scenarios and bad numbers', () => {
    const config = parseConfig(['--only', 'ack,digest', '--pipeline', '300'], { BENCH_RUNS: '5' });
    expect(config.only).toEqual(['ack', 'digest']);
    expect(config.pipeline.requests).toBe(300);
    expect(config.runs).toBe(5);
    expect(() => parseConfig(['--only', 'nope'], {})).toThrow(/unknown scenario "nope"/);
    expect(() => parseConfig(['--runs', '0'], {})).toThrow(/--runs: expected a positive whole number/);
    expect(() => parseConfig(['--bogus'], {})).toThrow(/Unknown option/);
  });
});
