import { describe, expect, it } from 'vitest';
import { botPerFile } from '../helpers/bot-per-file.ts';
import { CHANNELS, USERS } from '../helpers/harness.ts';
import { homeAfter, homeButtons, openHome } from '../helpers/slack-events.ts';

// The whole bot: changes reach the notify worker, which has the homes of the people concerned published again.
const h = botPerFile({ role: 'all' });

const publishesFor = (user: string) => h.slack.homes.filter((p) => p.user === user);

async function submit(text: string, user: string = USERS.dev, channel: string = CHANNELS.prod) {
  const ack = await h.fillAndSubmit(text, {}, user, channel);
  expect(ack.json).toEqual({ response_action: 'clear' });
}

describe('App Home refresh', () => {
  it('a new request appears on its approvers’ open homes and leaves them once approved in the channel', async () => {
    await openHome(h, USERS.lead);
    await homeAfter(h, USERS.lead, 0);
    const seen = h.slack.homes.length;
    await submit('resize shop-prod 102 cores=6');
    const request = await h.nextRequest();
    const withIt = await h.slack.waitFor(
      () =>
        h.slack.homes
          .slice(seen)
          .find((p) => p.user === USERS.lead && JSON.stringify(p.view).includes(request.id)),
      30_000,
    );
    expect(homeButtons(withIt.view.blocks as Record<string, unknown>[])).toContainEqual({
      action: 'approve',
      value: request.id,
    });
    // Nobody who never opened the home is published to.
    expect(publishesFor(USERS.dev2)).toEqual([]);

    const message = await h.requestMessage(request.id);
    const before = h.slack.homes.length;
    await h.click('approve', request.id, USERS.lead2, CHANNELS.prod, message);
    await h.waitForRequest(request.id, (r) => r.state === 'succeeded', 30_000);
    const after = await h.slack.waitFor(
      () =>
        h.slack.homes
          .slice(before)
          .find((p) => p.user === USERS.lead && !JSON.stringify(p.view).includes(request.id)),
      30_000,
    );
    expect(after.user).toBe(USERS.lead);
  });

  it('the requester’s open home follows their request to its end', async () => {
    await openHome(h, USERS.dev);
    await homeAfter(h, USERS.dev, 0);
    const seen = h.slack.homes.length;
    await submit('resize shop-staging 201 cores=2', USERS.dev, CHANNELS.staging);
    const request = await h.nextRequest(CHANNELS.staging);
    // shop-staging needs no approval: queued at once, then done by the worker.
    await h.waitForRequest(request.id, (r) => r.state === 'succeeded', 30_000);
    const done = await h.slack.waitFor(
      () =>
        h.slack.homes
          .slice(seen)
          .find(
            (p) =>
              p.user === USERS.dev &&
              JSON.stringify(p.view).includes(request.id) &&
              JSON.stringify(p.view).includes(':white_check_mark: Done'),
          ),
      30_000,
    );
    expect(done.user).toBe(USERS.dev);
  });

  it('a burst of changes is published as a few views, not one per change', async () => {
    await openHome(h, USERS.lead2);
    await homeAfter(h, USERS.lead2, 0);
    const seen = publishesFor(USERS.lead2).length;
    for (let i = 0; i < 12; i++) await submit(`resize shop-prod 101 cores=${3 + i}`, USERS.dev2);
    // Each submission is acknowledged before its request is stored: the last one may still be on its way.
    const pending = async () =>
      (await h.requests()).filter((r) => r.requester === USERS.dev2 && r.state === 'pending');
    for (let tries = 0; (await pending()).length < 12 && tries < 100; tries++)
      await new Promise((resolve) => setTimeout(resolve, 50));
    const made = await pending();
    expect(made).toHaveLength(12);
    // The last publish shows all twelve.
    await h.slack.waitFor(() => {
      const last = publishesFor(USERS.lead2).at(-1);
      return last && made.every((r) => JSON.stringify(last.view).includes(r.id));
    }, 30_000);
    const publishes = publishesFor(USERS.lead2).length - seen;
    console.info(
      `home refresh: 12 new requests (a change each for the approver) -> ${publishes} views.publish`,
    );
    expect(publishes).toBeLessThanOrEqual(4);
  });
});
