import { describe, expect, it } from 'vitest';
import { AuditLog } from '../../src/requests/audit/audit.ts';
import { botPerFile } from '../helpers/bot-per-file.ts';
import { CHANNELS, USERS } from '../helpers/harness.ts';

// The whole bot (ROLE=all) with a channel Slack will not let it post in.
const h = botPerFile({ role: 'all' });

/** The direct messages the bot sent `user`. */
const directMessages = (user: string) => h.slack.messages(user).map((m) => m.text ?? '');

describe('Slack refuses the request message', () => {
  it('not_in_channel: the requester is told why and to invite @cloudops; the request is cancelled, with its audit entry', async () => {
    h.slack.leaveChannel(CHANNELS.prod);
    const ack = await h.fillAndSubmit('resize shop-prod 102 cores=6', { reason: 'more traffic' });
    expect(ack.json).toEqual({ response_action: 'clear' });
    const request = await h.nextRequest();
    const cancelled = await h.waitForRequest(request.id, (r) => r.state === 'cancelled', 30_000);
    expect(cancelled.messageTs).toBeUndefined();

    const [told] = await h.slack.waitFor(() => {
      const found = directMessages(USERS.dev);
      return found.length > 0 ? found : undefined;
    });
    expect(told).toContain(`(request ${request.id}) could not be posted in <#${CHANNELS.prod}>`);
    expect(told).toContain(`cloudops is not a member of <#${CHANNELS.prod}>`);
    expect(told).toContain(`Invite @cloudops to <#${CHANNELS.prod}>`);
    expect(told).toContain('nothing was sent to the API');

    const audit = await new AuditLog(h.redis, h.prefix).read({ requestId: request.id });
    expect(audit.at(-1)).toMatchObject({
      state: 'cancelled',
      actor: 'cloudops',
      detail: 'Slack refused the request message (not_in_channel); nothing was sent',
    });
    // Told once; nothing waits for a message that will never exist, and the API was never called.
    await new Promise((r) => setTimeout(r, 1_000));
    expect(directMessages(USERS.dev)).toHaveLength(1);
    expect(h.sim.applied.filter((a) => a.vmid === 102)).toHaveLength(0);
    expect(await h.queues.notify.getJobCounts('delayed', 'waiting', 'active')).toEqual({
      delayed: 0,
      waiting: 0,
      active: 0,
    });
  });

  it('channel_not_found: the requester hears the bot cannot see the channel, and what to do', async () => {
    h.slack.failNext('chat.postMessage', { error: 'channel_not_found' });
    await h.fillAndSubmit('resize shop-prod 101 disk=60', {}, USERS.dev2);
    const request = await h.nextRequest();
    await h.waitForRequest(request.id, (r) => r.state === 'cancelled', 30_000);
    const told = await h.slack.waitFor(() => directMessages(USERS.dev2)[0]);
    expect(told).toContain(`cloudops cannot see <#${CHANNELS.prod}>`);
    expect(told).toContain('bind project shop-prod to another channel');
  });
});
