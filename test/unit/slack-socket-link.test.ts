import { describe, expect, it } from 'vitest';
import { scrubSecrets } from '../../src/observability/logger.ts';
import { deliveryKey } from '../../src/slack/redelivery.ts';
import { RECONNECT_POLICY, reconnectDelay } from '../../src/slack/socket-link.ts';

describe('reconnectDelay', () => {
  it('goes at once after a loss, then 1 s doubling to 30 s while attempts fail', () => {
    const middle = () => 0.5;
    const waits = [0, 1, 2, 3, 4, 5, 6, 7, 12].map((f) => reconnectDelay(f, RECONNECT_POLICY, middle));
    expect(waits).toEqual([0, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000]);
  });

  it('spreads each wait by ±20 %', () => {
    expect(reconnectDelay(3, RECONNECT_POLICY, () => 0)).toBe(3200);
    expect(reconnectDelay(3, RECONNECT_POLICY, () => 0.999_999)).toBe(4800);
  });
});

describe('deliveryKey', () => {
  it('names an event by event_id, an interaction or command by trigger_id, else the payload', () => {
    expect(deliveryKey({ event_id: 'Ev1', event: { type: 'app_mention' } })).toBe('event:Ev1');
    expect(deliveryKey({ type: 'view_submission', trigger_id: '1.2.abc' })).toBe('trigger:1.2.abc');
    const a = deliveryKey({ type: 'block_actions', actions: [{ action_ts: '1.1' }] });
    expect(a).toMatch(/^payload:[0-9a-f]{64}$/);
    expect(deliveryKey({ type: 'block_actions', actions: [{ action_ts: '1.1' }] })).toBe(a);
    expect(deliveryKey({ type: 'block_actions', actions: [{ action_ts: '1.2' }] })).not.toBe(a);
  });
});

describe('scrubSecrets', () => {
  it('removes the ticket of a Socket Mode URL and app-level tokens', () => {
    expect(
      scrubSecrets('connect wss://wss-primary.slack.com/link/?ticket=1234abcd-ef&app_id=A0CLOUDOPS failed'),
    ).toBe('connect wss://wss-primary.slack.com/link/?ticket=[redacted]&app_id=A0CLOUDOPS failed');
    expect(scrubSecrets('token xapp-1-A0CLOUDOPS-123-abc refused')).toBe('token [redacted] refused');
  });

  it('removes the token of a verification or registration link, and only a token-shaped path', () => {
    const token = 'srGdiZ0dMkBdoIvX5VtbkiaUg3rvW5Q5C-ZW_l_1o6M';
    expect(scrubSecrets(`"url":"https://ops.example/verify/${token}","x":1`)).toBe(
      '"url":"https://ops.example/verify/[redacted]","x":1',
    );
    expect(scrubSecrets(`https://ops.example/passkeys/${token}/register`)).toBe(
      'https://ops.example/passkeys/[redacted]/register',
    );
    expect(scrubSecrets('GET /verify-assets/page.js /verify/short')).toBe(
      'GET /verify-assets/page.js /verify/short',
    );
  });
});
