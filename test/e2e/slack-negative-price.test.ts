import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../helpers/harness.ts';

// The whole bot; the cloud sim answers a negative price, as a buggy or hostile API could.
let h: Harness;
beforeAll(async () => {
  h = await startHarness({ role: 'all' });
});
afterAll(async () => {
  await h?.close();
});

describe('a negative price from the API', () => {
  it('is unknown in the cost preview, with a note, and no cost comes out negative', async () => {
    h.sim.setPrice('zone-1', 'ram', '-1.0000');
    const ack = await h.fillAndSubmit('resize shop-prod 102 ram=16', {});
    expect(ack.json).toEqual({ response_action: 'clear' });
    const request = await h.waitForRequest((await h.nextRequest()).id, (r) => r.cost !== undefined);
    expect(request.cost?.hourly.startsWith('-')).toBe(false);
    expect(request.cost?.monthly.startsWith('-')).toBe(false);
    expect(request.cost?.diffMonthly).toBeUndefined();
    expect(request.cost?.note).toBe(
      "Prices unknown for ram (missing, malformed or negative in the API's answer); counted as 0. The difference is not known: no cost rule or limit is met by it.",
    );
    const message = await h.requestMessage(request.id);
    const shown = JSON.stringify(message.blocks);
    expect(shown).toContain('Prices unknown for ram');
    expect(shown).not.toMatch(/EUR -\\d/);
  });
});
