import { expect, it } from 'vitest';
import { botPerFile } from '../helpers/bot-per-file.ts';
import { CHANNELS, defaultPolicyYaml, USERS } from '../helpers/harness.ts';

// A lease's return is approved work like any other: a freeze of the project holds it, and the lease stays open
// until the return has run after the window.
const START = new Date('2026-11-24T14:00:00Z');
const HOUR = 3_600_000;
const wall = (hours: number) => new Date(START.getTime() + hours * HOUR).toISOString().slice(0, 16);

const h = botPerFile({
  role: 'all',
  now: START,
  // shop-prod freezes from 47 h to 50 h after the start: the lease (48 h) ends inside the window.
  policyYaml: (start) =>
    defaultPolicyYaml(start).replace(
      `approvers: [${USERS.lead}, ${USERS.lead2}]`,
      `approvers: [${USERS.lead}, ${USERS.lead2}]\n    freeze:\n      - { from: "${wall(47)}", to: "${wall(50)}", tz: UTC, reason: sale }`,
    ),
  startOptions: { duePolicy: { pollMs: 50, leaseMs: 60_000, batch: 50 } },
});

it('a freeze holds the return; the lease ends when the return has run after the window', async () => {
  const asked = await h.fillAndSubmit('resize shop-prod 102 cores=8 for=48h', {});
  expect(asked.json).toEqual({ response_action: 'clear' });
  const created = await h.nextRequest();
  await h.click('approve', created.id, USERS.lead, CHANNELS.prod, await h.requestMessage(created.id));
  const leased = await h.waitForRequest(
    created.id,
    (r) => r.state === 'succeeded' && r.leaseOpen === true,
    30_000,
  );

  h.clock.advance(48 * HOUR);
  const message = await h.requestMessage(leased.id);
  await h.slack.waitFor(() =>
    h.slack
      .thread(CHANNELS.prod, message.ts)
      .find((m) => (m.text ?? '').includes('The temporary increase of')),
  );
  const seen = h.slack.views.length;
  await h.click('lease_return', leased.id, USERS.lead);
  const view = (await h.openedView(seen)).view;
  expect((await h.submitView(view, { confirm: ['stopped'] }, USERS.lead)).json).toEqual({
    response_action: 'clear',
  });
  const back = await h.nextRequest();
  expect(back.params).toMatchObject({ returnOf: leased.id });
  // The clicker asked for it, so the other approver approves; the freeze then holds it.
  await h.click('approve', back.id, USERS.lead2, CHANNELS.prod, await h.requestMessage(back.id));
  await h.waitForRequest(back.id, (r) => r.state === 'frozen');
  const before = h.sim.applied.filter((a) => a.vmid === 102 && a.route === 'resize').length;
  expect((await h.store.get(leased.id))?.leaseOpen).toBe(true);

  h.clock.advance(2 * HOUR + 60_000);
  await h.waitForRequest(back.id, (r) => r.state === 'succeeded', 30_000);
  const ended = await h.waitForRequest(leased.id, (r) => r.leaseOpen === false);
  expect(ended.lease?.returned?.requestId).toBe(back.id);
  expect(h.sim.applied.filter((a) => a.vmid === 102 && a.route === 'resize').length - before).toBe(1);
});

it('an increase whose outcome was unknown opens its lease when a person marks it applied', async () => {
  h.sim.fault('resize', { kind: 'drop', afterApply: true });
  const asked = await h.fillAndSubmit('resize shop-prod 104 cores=4 for=7d', {});
  expect(asked.json).toEqual({ response_action: 'clear' });
  const created = await h.nextRequest();
  const message = await h.requestMessage(created.id);
  await h.click('approve', created.id, USERS.lead, CHANNELS.prod, message);
  const unknown = await h.waitForRequest(created.id, (r) => r.state === 'unknown', 30_000);
  expect(unknown.leaseOpen).toBeUndefined();
  await h.click('resolve_done', created.id, USERS.dev, CHANNELS.prod, { ts: message.ts });
  const resolved = await h.waitForRequest(created.id, (r) => r.state === 'resolved_done');
  const sentAt = new Date(unknown.outcomes.at(-1)?.at ?? '');
  expect(resolved).toMatchObject({
    leaseOpen: true,
    lease: { startedAt: sentAt.toISOString(), endsAt: new Date(sentAt.getTime() + 168 * HOUR).toISOString() },
  });
  expect((await h.store.openLeases(CHANNELS.prod)).map((r) => r.id)).toContain(created.id);
});
