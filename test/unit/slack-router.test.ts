import { App } from '@slack/bolt';
import { describe, expect, it } from 'vitest';
import { createRouter } from '../../src/slack/router.ts';

/** A Bolt app that is never started: events go straight into processEvent, as the receiver hands them over. */
function boltApp(): App {
  return new App({
    token: 'xoxb-router-test',
    signingSecret: 'router-test',
    tokenVerificationEnabled: false,
    botId: 'B0ROUTER',
    botUserId: 'U0ROUTER',
    convoStore: false,
  });
}

const click = (actionId: string) => ({
  type: 'block_actions',
  team: { id: 'T0R' },
  user: { id: 'U0R' },
  channel: { id: 'C0R' },
  actions: [{ type: 'button', action_id: actionId, block_id: 'b', value: 'v', action_ts: '1' }],
  trigger_id: '1.2.3',
  api_app_id: 'A0R',
  token: 'legacy',
  container: { type: 'message' },
});

const submit = (callbackId: string) => ({
  type: 'view_submission',
  team: { id: 'T0R' },
  user: { id: 'U0R' },
  view: { id: 'V1', callback_id: callbackId, type: 'modal', private_metadata: '', state: { values: {} } },
  api_app_id: 'A0R',
  token: 'legacy',
  trigger_id: '1.2.3',
});

/** Sends one event through Bolt and says which handler ran and whether it was acked. */
async function deliver(app: App, body: Record<string, unknown>): Promise<boolean> {
  let acked = false;
  await app.processEvent({
    body,
    ack: async () => {
      acked = true;
    },
  });
  return acked;
}

describe('slack router', () => {
  it('hands each action and view to the handler of its exact id, and nothing else', async () => {
    const app = boltApp();
    const router = createRouter();
    const seen: string[] = [];
    router.action('approve', async ({ ack }) => {
      seen.push('approve');
      await ack();
    });
    router.action('resolve.ok', async ({ ack }) => {
      seen.push('resolve.ok');
      await ack();
    });
    router.view('resize', async ({ ack }) => {
      seen.push('resize view');
      await ack();
    });
    router.attach(app);

    expect(await deliver(app, click('approve'))).toBe(true);
    expect(await deliver(app, click('resolve.ok'))).toBe(true);
    expect(await deliver(app, submit('resize'))).toBe(true);
    // Near misses: a prefix, a suffix, and "." read as any character.
    expect(await deliver(app, click('approve_all'))).toBe(false);
    expect(await deliver(app, click('xapprove'))).toBe(false);
    expect(await deliver(app, click('resolveXok'))).toBe(false);
    expect(await deliver(app, submit('resize_schedule'))).toBe(false);
    expect(seen).toEqual(['approve', 'resolve.ok', 'resize view']);
  });

  it('refuses one id registered twice', () => {
    const router = createRouter();
    router.action('approve', async () => undefined);
    expect(() => router.action('approve', async () => undefined)).toThrow(/approve is registered twice/);
  });
});
