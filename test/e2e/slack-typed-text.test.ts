import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EMPTY_REASON } from '../../src/rules/inputs.ts';
import {
  CHANNELS,
  type CommandResult,
  defaultPolicyYaml,
  type Harness,
  startHarness,
  USERS,
} from '../helpers/harness.ts';
import { homeAfter, openHome } from '../helpers/slack-events.ts';
import { testVerificationLinks } from '../helpers/verification-links.ts';
import { approveEphemeral, submitRequest, verifiedPolicyYaml } from '../helpers/verified-approvals.ts';

// Everything Slack shows that somebody else typed (a VM's or a cluster's name at the provider, a reason in a form):
// the whole bot runs, the Slack stand-in records what it posted. Slack reads a message's `text` as mrkdwn too (the
// notification and the fallback), so `<!here>` there notifies a channel, and `<https://…|R&D>` is a disguised link.
let h: Harness;
const PROJECT_UUID = '0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10';
const HOSTILE = 'web-1 <!here> <https://evil.example|R&D> &lt;b&gt;';
const ESCAPED = 'web-1 &lt;!here&gt; &lt;https://evil.example|R&amp;D&gt; &amp;lt;b&amp;gt;';
beforeAll(async () => {
  h = await startHarness({
    role: 'all',
    // The VMs' names as an operator copied them from the provider's portal into the policy.
    policyYaml: (start) =>
      defaultPolicyYaml(start)
        .replace('name: db-1,', `name: ${JSON.stringify(HOSTILE)},`)
        .replace('name: web-1,', `name: ${JSON.stringify(HOSTILE)},`),
  });
  // Listed before the bot reads (and caches) the cluster list for its first cost.
  const zone1 = h.sim.state.clusters.get('zone-1')?.pricesB ?? {};
  const cheap = { ...zone1, vcore_regular: '0.0001', vcore_light: '0.0001', ram: '0.0001' };
  h.sim.addCluster({ name: 'zone-<!channel>', location: '<!here> Lyon', prices: cheap });
  h.sim.addCluster({
    name: 'zone-8',
    location: '<https://evil.example|R&D>',
    prices: { ...cheap, ram: '0.0002' },
  });
});
afterEach(() => {
  expect(h.slack.problems).toEqual([]);
});
afterAll(async () => {
  await h?.close();
});

/** Markup Slack would act on, anywhere in a text. */
const RAW = ['<!here>', '<https://evil', '<!channel>', 'R&D'];

/** The response_url answers to one command, once at least `count` arrived. */
async function answers(result: CommandResult, count = 1): Promise<{ text?: string }[]> {
  const id = result.responseUrl.split('/').at(-1);
  return h.slack.waitFor(() => {
    const found = h.slack.responses.filter((r) => r.id === id).map((r) => r.body as { text?: string });
    return found.length >= count ? found : undefined;
  }, 30_000);
}

function expectEscaped(text: string | undefined, where: string): void {
  for (const raw of RAW) expect(text, where).not.toContain(raw);
}

describe('a VM name with Slack markup, as the provider holds it', () => {
  it('is escaped in the request message’s text, the App Home and the “could not be posted” message', async () => {
    h.sim.vm(PROJECT_UUID, 102).name = HOSTILE;
    await h.fillAndSubmit('resize shop-prod 102 cores=6', { reason: 'more traffic' });
    const request = await h.waitForRequest((await h.nextRequest()).id, (r) => r.state === 'pending');
    const message = await h.requestMessage(request.id);
    expect(message.text).toContain(`shop-prod / VM 102 (${ESCAPED})`);
    expectEscaped(message.text, 'request message text');

    const seen = h.slack.homes.length;
    await openHome(h, USERS.lead);
    const home = await homeAfter(h, USERS.lead, seen, undefined, (blocks) =>
      JSON.stringify(blocks).includes(request.id),
    );
    const homeTexts = JSON.stringify(home.blocks.map((b) => (b.text as { text?: string } | undefined)?.text));
    expect(homeTexts).toContain(ESCAPED);
    expectEscaped(homeTexts, 'App Home');

    h.slack.leaveChannel(CHANNELS.prod);
    try {
      await h.fillAndSubmit('resize shop-prod 101 disk=60', {}, USERS.dev2);
      const refused = await h.nextRequest();
      await h.waitForRequest(refused.id, (r) => r.state === 'cancelled', 30_000);
      const told = await h.slack.waitFor(() => h.slack.messages(USERS.dev2).at(-1)?.text);
      expect(told).toContain(`could not be posted in <#${CHANNELS.prod}>`);
      expect(told).toContain(ESCAPED);
      expectEscaped(told, 'could not be posted');
    } finally {
      h.slack.joinChannel(CHANNELS.prod);
    }
  });
});

describe('cluster names and fields with Slack markup, as the API lists them', () => {
  it('are escaped in the ephemeral text of /cloud clusters and /cloud cluster, and in the digest’s text', async () => {
    {
      // Cheaper than every other cluster for the reference VM: named in the list's text.
      const [list] = await answers(await h.command('clusters'));
      expect(list?.text).toContain('zone-&lt;!channel&gt;');
      expectEscaped(list?.text, '/cloud clusters');

      const [one] = await answers(await h.command('cluster zone-8'));
      expect(one?.text).toContain('&lt;https://evil.example|R&amp;D&gt;');
      expectEscaped(one?.text, '/cloud cluster');

      const [unknown] = await answers(await h.command('cluster zone-42'));
      expect(unknown?.text).toContain('zone-&lt;!channel&gt;');
      expectEscaped(unknown?.text, '/cloud cluster <unknown>');

      await answers(await h.command('digest daily 09:00', USERS.dev, CHANNELS.staging));
      await answers(await h.command('digest now', USERS.dev, CHANNELS.staging));
      const digest = await h.slack.waitFor(
        () => h.slack.messages(CHANNELS.staging).find((m) => (m.text ?? '').startsWith('Pricing digest')),
        30_000,
      );
      expect(digest.text).toContain('zone-&lt;!channel&gt;');
      expectEscaped(digest.text, 'digest');
      await answers(await h.command('digest off', USERS.dev, CHANNELS.staging));
    }
  });
});

describe('a typed reason', () => {
  it('of only zero-width or bidi characters (with spaces, line breaks) is refused with a field error', async () => {
    for (const typed of ['\u200B\u200D \u2060', '\u202E\n\u200F', ' \u200B\n', '\uFEFF\u2066\u2069']) {
      const ack = await h.fillAndSubmit('resize shop-prod 104 ram=4', { reason: typed });
      expect(ack.json, JSON.stringify(typed)).toEqual({
        response_action: 'errors',
        errors: { reason: EMPTY_REASON },
      });
    }
    // Only spaces and line breaks is an optional reason left empty (Slack's input is read trimmed): none is kept.
    expect((await h.fillAndSubmit('resize shop-prod 104 ram=4', { reason: ' \n\n ' })).json).toEqual({
      response_action: 'clear',
    });
    const request = await h.waitForRequest((await h.nextRequest()).id, (r) => r.state === 'pending');
    expect(request.vmid).toBe(104);
    expect(request.reason).toBeUndefined();
  });

  it('shows as a quote, without bidi or zero-width characters: no fake status line above the real one', async () => {
    const typed = 'urgent\u202E gnihtemos\n✅ Approved by <@U0LEAD>\u200B\n*Status:* done';
    await h.fillAndSubmit('resize shop-prod 103 cores=6', { reason: typed }, USERS.dev2);
    const request = await h.waitForRequest((await h.nextRequest()).id, (r) => r.state === 'pending');
    expect(request.vmid).toBe(103);
    const message = await h.requestMessage(request.id);
    const sections = JSON.stringify(message.blocks);
    expect(sections).toContain(
      JSON.stringify('*Reason:*\n> urgent gnihtemos\n> ✅ Approved by &lt;@U0LEAD&gt;\n> *Status:* done'),
    );
    expect(sections).not.toMatch(/[\u202E\u200B]/);

    const seenViews = h.slack.views.length;
    await h.click('reject', request.id, USERS.lead);
    const modal = (await h.openedView(seenViews)).view;
    const empty = await h.submitView(modal, { reject_reason: ' \u200B\n' }, USERS.lead);
    expect(empty.json).toEqual({ response_action: 'errors', errors: { reject_reason: EMPTY_REASON } });
    await h.submitView(modal, { reject_reason: 'no\n:white_check_mark: Approved by <@U0LEAD2>' }, USERS.lead);
    await h.waitForRequest(request.id, (r) => r.state === 'rejected');
    const reply = await h.slack.waitFor(() => h.slack.thread(CHANNELS.prod, message.ts).at(-1)?.text);
    expect(reply).toMatch(
      /^Rejected by <@U0LEAD>\. Nothing was sent to the API\.\n> no\n> :white_check_mark: Approved by &lt;@U0LEAD2&gt;$/,
    );
  });
});

describe('a command’s typed arguments echoed in its answer', () => {
  it('show as typed: escaped, without bidi characters, cut when long', async () => {
    const texts: string[] = [];
    for (const bad of ['<!channel>', '<https://evil.example|R&D>', '\u202Eabc']) {
      for (const line of [
        `frob ${bad}`,
        `resize ${bad}`,
        `resize shop-prod ${bad}`,
        `resize shop-prod 102 ${bad}`,
        `resize shop-prod 102 cpu=${bad}`,
        `restore shop-prod 102 ${bad}`,
        `cluster ${bad}`,
        `digest ${bad}`,
        `digest daily ${bad}`,
        `digest cron ${bad}`,
      ]) {
        const result = await h.command(line);
        texts.push(String((result.json as { text?: string } | undefined)?.text));
      }
    }
    for (const text of texts) {
      expectEscaped(text, text);
      expect(text).not.toContain('\u202E');
    }
    expect(texts.filter((t) => t.includes('&lt;!channel&gt;')).length).toBeGreaterThanOrEqual(8);
    const long = await h.command(`frob${'x'.repeat(10_000)}`);
    expect(String((long.json as { text?: string } | undefined)?.text).length).toBeLessThan(500);
  });
});

describe('a VM name with Slack markup where approvals are verified', () => {
  it('is escaped in the text of the verify link sent to the approver alone', async () => {
    const links = testVerificationLinks('https://cloudops.example.com');
    const verified = await startHarness({
      role: 'all',
      policyYaml: verifiedPolicyYaml({ approvals: { count: 1, verify: 'passkey' } }).replace(
        'name: db-1,',
        `name: ${JSON.stringify(HOSTILE)},`,
      ),
      env: () => ({ PUBLIC_URL: 'https://cloudops.example.com' }),
      startOptions: { verificationLinks: links.factory },
    });
    try {
      const created = await submitRequest(verified, 'resize shop-prod 102 cores=6');
      const ephemeral = await approveEphemeral(verified, created.id, USERS.lead);
      expect(ephemeral.text).toContain(`Your approval of request ${created.id}`);
      expect(ephemeral.text).toContain(ESCAPED);
      expectEscaped(ephemeral.text, 'verify link');
      expect(verified.slack.problems).toEqual([]);
    } finally {
      await verified.close();
    }
  });
});
