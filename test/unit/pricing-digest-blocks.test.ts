import { describe, expect, it } from 'vitest';
import { SlackChecks } from '../../sim/slack/checks.ts';
import type { Cluster } from '../../src/cloud/types.ts';
import { parsePolicy } from '../../src/config/policy.ts';
import { comparePrice, diffSnapshots } from '../../src/pricing/diff.ts';
import { toSnapshot } from '../../src/pricing/price-fields.ts';
import { clusterViews, referenceVmView } from '../../src/slack/blocks/cluster-views.ts';
import { MAX_BLOCKS_PER_MESSAGE } from '../../src/slack/blocks/clusters.ts';
import { changeLine, digestFailureMessage, digestMessages } from '../../src/slack/blocks/digest.ts';

const checks = new SlackChecks();
const policy = parsePolicy('currency: CHF\nreference_vm: { cores: 2, ram_gb: 4, os_disk_gb: 50 }\n');

function cluster(
  name: string,
  prices: Partial<Record<string, string>>,
  other: Record<string, string> = {},
): Cluster {
  return {
    name,
    description: `${name} zone`,
    location: `Loc ${name}`,
    shape: 'B',
    extra: {},
    prices: {
      vcoreRegular: prices.vcoreRegular ?? '0.0100',
      vcoreLight: prices.vcoreLight ?? '0.0050',
      ram: prices.ram ?? '0.0050',
      storageFast: prices.storageFast ?? '0.0002',
      publicIp: prices.publicIp ?? '0.0040',
      other,
    },
  };
}

const allText = (blocks: unknown) => JSON.stringify(blocks);

describe('price comparison', () => {
  it('gives direction and percentage to one decimal, exactly', () => {
    expect(comparePrice('z', 'ram', '0.0050', '0.0055')).toMatchObject({ direction: 'up', percent: '+10.0' });
    expect(comparePrice('z', 'ram', '0.03', '0.01')).toMatchObject({ direction: 'down', percent: '-66.7' });
    // 0.1 + 0.2 style traps: exact decimals, so 0.3 → 0.33 is +10.0 not 9.99…
    expect(comparePrice('z', 'ram', '0.3', '0.33')).toMatchObject({ percent: '+10.0' });
    expect(comparePrice('z', 'ram', '0.010', '0.01')).toBeUndefined();
    expect(comparePrice('z', 'ram', '0', '0.01')).toMatchObject({ direction: 'up', percent: undefined });
    expect(comparePrice('z', 'ram', undefined, '0.01')).toMatchObject({ direction: 'new' });
    expect(comparePrice('z', 'ram', '0.01', undefined)).toMatchObject({ direction: 'gone' });
    expect(comparePrice('z', 'ram', 'n/a', 'soon')).toMatchObject({ direction: 'changed' });
  });
});

describe('snapshot diff', () => {
  const at = new Date('2026-01-01T09:00:00Z');
  const before = toSnapshot([cluster('zone-1', {}), cluster('zone-2', {}), cluster('zone-9', {})], at);

  it('finds new and removed clusters and moved prices, unknown fields included', () => {
    const after = toSnapshot(
      [
        cluster('zone-1', { ram: '0.0055' }),
        cluster('zone-2', { vcoreRegular: '0.0090' }, { gpu: '1.5' }),
        cluster('zone-4', {}),
      ],
      new Date('2026-01-02T09:00:00Z'),
    );
    const diff = diffSnapshots(before, after);
    expect(diff.hasPrevious).toBe(true);
    expect(diff.added.map((c) => c.name)).toEqual(['zone-4']);
    expect(diff.removed.map((c) => c.name)).toEqual(['zone-9']);
    expect(diff.changes.map((c) => [c.cluster, c.key, c.direction, c.percent])).toEqual([
      ['zone-1', 'ram', 'up', '+10.0'],
      ['zone-2', 'vcore_regular', 'down', '-10.0'],
      ['zone-2', 'gpu', 'new', undefined],
    ]);
    expect(changeLine(diff.changes[0]!)).toBe('• *zone-1* RAM 0.0050 → 0.0055 (:arrow_up: +10.0%)');
  });

  it('has nothing to compare on a first digest', () => {
    expect(diffSnapshots(undefined, before)).toMatchObject({ hasPrevious: false, changes: [] });
  });
});

describe('digest blocks', () => {
  const reference = referenceVmView(policy.reference_vm);

  it('marks the cheapest reference VM, shows exact hourly and monthly cost with the currency', () => {
    const views = clusterViews(
      [cluster('zone-2', { ram: '0.0060' }), cluster('zone-1', {})],
      policy.reference_vm,
    );
    // 2 × 0.0100 + 4 × 0.0050 + 50 × 0.0002 + 1 × 0.0040 = 0.0540 /h; × 730 = 39.42
    expect(views[0]).toMatchObject({
      name: 'zone-1',
      cost: { hourly: '0.0540', monthly: '39.42', cheapest: true },
    });
    expect(views[1]).toMatchObject({
      name: 'zone-2',
      cost: { hourly: '0.0580', monthly: '42.34', cheapest: false },
    });
    const [message] = digestMessages({
      clusters: views,
      diff: { hasPrevious: false, added: [], removed: [], changes: [] },
      currency: policy.currency,
      referenceVm: reference,
      at: new Date('2026-01-01T09:00:00Z'),
    });
    expect(message).toBeDefined();
    expect(checks.checkMessageBlocks(message?.blocks)).toEqual([]);
    const text = allText(message?.blocks);
    expect(text).toContain('0.0540 CHF/h · 39.42 CHF/mo');
    expect(text).toContain('*zone-1* · Loc zone-1  :star: cheapest');
    expect(text).not.toContain('*zone-2* · Loc zone-2  :star:');
    expect(text).toContain('First digest in this channel');
    expect(message?.text).toContain('cheapest reference VM in zone-1');
  });

  it('a cluster missing a price shows n/a and is never called cheapest', () => {
    const broken = cluster('zone-0', {});
    delete broken.prices.ram;
    const views = clusterViews([broken, cluster('zone-1', {})], policy.reference_vm);
    expect(views[0]?.cost).toMatchObject({ hourly: undefined, missing: ['ram'], cheapest: false });
    expect(views[1]?.cost.cheapest).toBe(true);
  });

  it('splits 120 clusters and 300 changes into messages inside Slack limits, each complete', () => {
    const names = Array.from({ length: 120 }, (_, i) => `zone-${i + 1}`);
    const before = toSnapshot(
      names.map((n) => cluster(n, {})),
      new Date('2026-01-01T09:00:00Z'),
    );
    const nowClusters = names.map((n, i) =>
      cluster(n, { ram: `0.00${50 + (i % 40)}`, vcoreLight: '0.0060', publicIp: '0.0041' }),
    );
    const after = toSnapshot(nowClusters, new Date('2026-01-02T09:00:00Z'));
    const diff = diffSnapshots(before, after);
    expect(diff.changes.length).toBeGreaterThan(300);
    const messages = digestMessages({
      clusters: clusterViews(nowClusters, policy.reference_vm),
      diff,
      currency: 'EUR',
      referenceVm: reference,
      at: new Date('2026-01-02T09:00:00Z'),
    });
    expect(messages.length).toBeGreaterThan(2);
    const shown = new Set<string>();
    messages.forEach((m, i) => {
      expect(checks.checkMessageBlocks(m.blocks)).toEqual([]);
      expect(m.blocks.length).toBeLessThanOrEqual(MAX_BLOCKS_PER_MESSAGE);
      expect(m.blocks[0]).toMatchObject({
        type: 'header',
        text: { text: `Pricing digest (${i + 1}/${messages.length})` },
      });
      expect(allText(m.blocks[1])).toContain('hourly prices in EUR');
      expect(m.text).toContain(`(${i + 1}/${messages.length})`);
      for (const block of m.blocks) {
        const title = /^\*(zone-\d+)\* · /.exec((block as { text?: { text?: string } }).text?.text ?? '');
        if (title?.[1]) shown.add(title[1]);
      }
    });
    expect(shown.size).toBe(120);
    expect(allText(messages.map((m) => m.blocks))).toContain(
      '*zone-2* vCore light 0.0050 → 0.0060 (:arrow_up: +20.0%)',
    );
  });

  it('the failure notice says why and when the next digest is', () => {
    const message = digestFailureMessage('the service answered 503', new Date('2026-01-02T09:00:00Z'));
    expect(message.text).toMatch(
      /^:warning: Pricing digest: the cloud API could not be read \(the service answered 503\)\. The next digest is at <!date\^/,
    );
    expect(checks.checkMessageBlocks(message.blocks)).toEqual([]);
  });
});
