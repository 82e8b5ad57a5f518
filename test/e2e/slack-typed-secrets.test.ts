import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../sim/local-redis.ts';
import { newAgentToken } from '../../src/config/agents.ts';
import { CHANNELS, type Harness, startHarness, USERS } from '../helpers/harness.ts';

// Whatever people type (a reason, a reject reason) reaches the store, the audit and the channel; a secret pasted
// into it must not. The whole bot runs, so the request message and the thread reply are really posted.
let h: Harness;
// Credentials inside a configured URL (the audit receiver's, the proxy's; REDIS_URL's are read the same way) are secrets.
const URL_PASSWORD = 'receiver-pass-5e21';
const URL_TOKEN = 'receiver-token-9c07';
const PROXY_PASSWORD = 'proxy-pass-2b6d';
beforeAll(async () => {
  const port = await freePort();
  h = await startHarness({
    role: 'all',
    env: () => ({
      AUDIT_WEBHOOK_URL: `http://vector:${URL_PASSWORD}@127.0.0.1:${port}/audit?token=${URL_TOKEN}`,
      // Only https:// goes through it: the stand-ins here are http:// on loopback.
      HTTPS_PROXY: `http://egress:${PROXY_PASSWORD}@127.0.0.1:${port}`,
    }),
  });
});
afterEach(() => {
  expect(h.slack.problems).toEqual([]);
});
afterAll(async () => {
  await h?.close();
});

/** Everything the bot sent to Slack, as one string. */
const sentToSlack = () => JSON.stringify([h.slack.calls.map((c) => c.args), h.slack.responses]);

describe('a secret typed into a reason', () => {
  it('is replaced by [redacted] in the request, its audit, its message and the reject reply; the rest is kept', async () => {
    const pasted = [
      'xoxp-1234567890-abcdefABCDEF',
      'xwfp-W123-secretpart',
      // An agent's token, copied from wherever it was shown: the bot knows only its hash, so it is caught by shape.
      newAgentToken(),
      `Bearer ${'k9'.repeat(10)}`,
      h.signingSecret,
      h.sim.apiKey,
      URL_PASSWORD,
      URL_TOKEN,
      PROXY_PASSWORD,
    ];
    const typed = `Black Friday, see ${pasted.join(' and ')}`;
    const ack = await h.fillAndSubmit('resize shop-prod 102 cores=6', { reason: typed });
    expect(ack.json).toEqual({ response_action: 'clear' });
    const request = await h.waitForRequest((await h.nextRequest()).id, (r) => r.state === 'pending');
    expect(request.reason).toMatch(/^Black Friday, see \[redacted\] and /);
    await h.slack.waitFor(() => h.slack.messages(CHANNELS.prod).some((m) => m.text?.includes(request.id)));

    const seenViews = h.slack.views.length;
    await h.click('reject', request.id, USERS.lead2);
    const modal = (await h.openedView(seenViews)).view;
    await h.submitView(modal, { reject_reason: `not now, ${h.sim.apiKey} leaked` }, USERS.lead2);
    const rejected = await h.waitForRequest(request.id, (r) => r.state === 'rejected');
    expect(rejected.rejectReason).toBe('not now, [redacted] leaked');
    const message = h.slack.messages(CHANNELS.prod).find((m) => m.text?.includes(request.id));
    await h.slack.waitFor(() => h.slack.thread(CHANNELS.prod, message?.ts ?? '').length > 0);
    expect(JSON.stringify(h.slack.thread(CHANNELS.prod, message?.ts ?? ''))).toContain('[redacted] leaked');

    // The words around the secret are kept where the reason shows; the audit has the reject reason only.
    for (const where of [JSON.stringify(rejected), sentToSlack()]) expect(where).toContain('Black Friday');
    const audit = (await h.auditOf(request.id)).join('\n');
    expect(audit).toContain('not now, [redacted] leaked');
    for (const where of [JSON.stringify(rejected), audit, sentToSlack()]) {
      for (const secret of [...pasted, 'k9k9k9k9']) expect(where).not.toContain(secret);
    }
    for (const line of h.logs) for (const secret of pasted) expect(line).not.toContain(secret);
  });
});
