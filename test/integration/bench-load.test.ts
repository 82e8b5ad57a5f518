import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BareBolt, startBareBolt } from '../../bench/lib/bare-bolt.ts';
import { type LoadGenerator, startLoadGenerator } from '../../bench/lib/load-generator.ts';
import { clickBody, commandBody, newTriggerId, type SlackIdentity } from '../../bench/lib/slack-request.ts';

const SECRET = 'bench-test-signing-secret';
const who: SlackIdentity = {
  teamId: 'T0TEST',
  channelId: 'C0TEST',
  userId: 'U0TEST',
  responseUrl: 'http://127.0.0.1:9/none',
};

describe('bench load generator against a bare Bolt receiver', () => {
  let bolt: BareBolt;
  let load: LoadGenerator;

  beforeAll(async () => {
    bolt = await startBareBolt(SECRET, 'approve');
    load = await startLoadGenerator();
  });
  afterAll(async () => {
    await load?.close();
    await bolt?.close();
  });

  it('sends signed slash commands at a fixed rate that Bolt verifies and acks', async () => {
    const result = await load.run({
      url: bolt.url,
      secret: SECRET,
      who,
      kind: { type: 'command', text: 'resize bench 101 cores=4' },
      shape: { type: 'rate', perSecond: 50, durationMs: 400 },
      connections: 10,
      timeoutMs: 5000,
    });
    expect(result.errors).toBe(0);
    expect(result.statuses).toEqual({ 200: 20 });
    expect(result.latencies).toHaveLength(20);
    // 20 requests at 50/s are spread over about 400 ms, not sent at once.
    expect(result.elapsedMs).toBeGreaterThanOrEqual(370);
  });

  it('sends a burst of signed button clicks, one value each', async () => {
    const values = Array.from({ length: 30 }, (_, i) => `R${i}`);
    const result = await load.run({
      url: bolt.url,
      secret: SECRET,
      who,
      kind: { type: 'action', actionId: 'approve', values },
      shape: { type: 'burst', count: 30 },
      connections: 30,
      timeoutMs: 5000,
    });
    expect(result.statuses).toEqual({ 200: 30 });
  });

  it('counts requests signed with the wrong secret as errors (401), so a broken signer cannot pass as fast', async () => {
    const result = await load.run({
      url: bolt.url,
      secret: 'not-the-secret',
      who,
      kind: { type: 'command', text: 'help' },
      shape: { type: 'burst', count: 5 },
      connections: 5,
      timeoutMs: 5000,
    });
    expect(result.errors).toBe(5);
    expect(result.statuses).toEqual({ 401: 5 });
    expect(result.latencies).toHaveLength(0);
  });

  it('reports running out of click values as an error instead of sending fewer requests', async () => {
    const result = await load.run({
      url: bolt.url,
      secret: SECRET,
      who,
      kind: { type: 'action', actionId: 'approve', values: ['R1'] },
      shape: { type: 'burst', count: 3 },
      connections: 3,
      timeoutMs: 5000,
    });
    expect(result.errors).toBeGreaterThan(0);
    expect(result.firstError).toMatch(/only 1 action values/);
  });

  it('signs ready form bodies as it sends them (the steady flow: command, submission, click), one each', async () => {
    const bodies = [
      commandBody(who, 'resize bench 101 cores=4', newTriggerId()),
      clickBody(who, 'approve', 'R1', '1700000000.000100'),
    ];
    const result = await load.run({
      url: bolt.url,
      secret: SECRET,
      who,
      kind: { type: 'form', bodies },
      shape: { type: 'burst', count: 2 },
      connections: 2,
      timeoutMs: 5000,
    });
    expect(result.statuses).toEqual({ 200: 2 });
    const short = await load.run({
      url: bolt.url,
      secret: SECRET,
      who,
      kind: { type: 'form', bodies },
      shape: { type: 'burst', count: 3 },
      connections: 3,
      timeoutMs: 5000,
    });
    expect(short.firstError).toMatch(/only 2 bodies/);
  });
});
