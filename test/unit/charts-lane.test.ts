import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  CHART_ATTEMPTS,
  CHART_MAX_DEFER_MS,
  ChartLane,
  ChartRateLimitedError,
} from '../../src/jobs/digest-chart.ts';

const logger = pino({ level: 'silent' });

afterEach(() => {
  vi.useRealTimers();
});

describe('the chart lane: digests first, charts after', () => {
  it('runs at most `concurrency` charts at once, in the order given', async () => {
    const lane = new ChartLane(logger, 2);
    const started: number[] = [];
    const finish: (() => void)[] = [];
    for (let i = 0; i < 4; i++)
      lane.push(
        () =>
          new Promise<void>((resolve) => {
            started.push(i);
            finish.push(resolve);
          }),
      );
    await vi.waitFor(() => expect(started).toEqual([0, 1]));
    finish.shift()?.();
    await vi.waitFor(() => expect(started).toEqual([0, 1, 2]));
    for (const done of finish.splice(0)) done();
    await vi.waitFor(() => expect(started).toEqual([0, 1, 2, 3]));
    for (const done of finish.splice(0)) done();
    await lane.drain(1000);
  });

  it('holds charts while digests are being sent, and runs them once the queue is quiet', async () => {
    vi.useFakeTimers();
    const lane = new ChartLane(logger, 2);
    let busy = true;
    lane.busy = async () => busy;
    let ran = 0;
    lane.push(async () => {
      ran++;
    });
    await vi.advanceTimersByTimeAsync(2000);
    expect(ran).toBe(0);
    busy = false;
    await vi.advanceTimersByTimeAsync(300);
    expect(ran).toBe(1);
  });

  it('does not hold a chart longer than the defer limit', async () => {
    vi.useFakeTimers();
    const lane = new ChartLane(logger, 2);
    lane.busy = async () => true;
    let ran = 0;
    lane.push(async () => {
      ran++;
    });
    await vi.advanceTimersByTimeAsync(CHART_MAX_DEFER_MS - 500);
    expect(ran).toBe(0);
    await vi.advanceTimersByTimeAsync(1000);
    expect(ran).toBe(1);
  });

  it('drops charts beyond its bound, and a failing chart does not stop the next', async () => {
    const lane = new ChartLane(logger, 1, 1);
    lane.busy = async () => true;
    expect(lane.push(async () => undefined)).toBe(true);
    expect(lane.push(async () => undefined)).toBe(false);
    await lane.drain(10);
    const next = new ChartLane(logger, 1);
    let ran = false;
    next.push(async () => {
      throw new Error('upload refused');
    });
    next.push(async () => {
      ran = true;
    });
    await next.drain(1000);
    expect(ran).toBe(true);
  });

  it('after a 429 every chart waits Retry-After, and the limited one is tried again first (at most CHART_ATTEMPTS times)', async () => {
    vi.useFakeTimers();
    const lane = new ChartLane(logger, 1);
    const order: string[] = [];
    let limited = 0;
    lane.push(async () => {
      order.push('a');
      limited++;
      throw new ChartRateLimitedError(5000);
    });
    lane.push(async () => {
      order.push('b');
    });
    await vi.advanceTimersByTimeAsync(10);
    expect(order).toEqual(['a']);
    await vi.advanceTimersByTimeAsync(4000);
    expect(order).toEqual(['a']);
    await vi.advanceTimersByTimeAsync(1100);
    expect(order).toEqual(['a', 'a']);
    await vi.advanceTimersByTimeAsync(20_000);
    expect(limited).toBe(CHART_ATTEMPTS);
    expect(order).toEqual([...Array(CHART_ATTEMPTS).fill('a'), 'b']);
  });
});
