import { describe, expect, it } from 'vitest';
import { botPerFile } from '../helpers/bot-per-file.ts';
import { CHANNELS, type CommandResult, USERS } from '../helpers/harness.ts';
import { PNG_SIGNATURE, pngHeader } from '../helpers/png.ts';

// The whole bot (web + worker + scheduler): signed slash commands in, response_url answers and posts out.
const h = botPerFile({ role: 'all' });

type Body = { response_type?: string; text?: string; blocks?: unknown[] };

/** The response_url answers to one command, once at least `count` arrived. */
async function answers(result: CommandResult, count = 1): Promise<Body[]> {
  const id = result.responseUrl.split('/').at(-1);
  return h.slack.waitFor(() => {
    const found = h.slack.responses.filter((r) => r.id === id).map((r) => r.body as Body);
    return found.length >= count ? found : undefined;
  }, 30_000);
}

const json = (value: unknown) => JSON.stringify(value);

describe('/cloud clusters and /cloud cluster', () => {
  it('clusters: acks at once, then lists every active cluster with prices and the reference VM, cheapest marked', async () => {
    const result = await h.command('clusters');
    expect(result.status).toBe(200);
    const [answer] = await answers(result);
    expect(answer?.response_type).toBe('ephemeral');
    const text = json(answer?.blocks);
    for (const name of ['zone-1', 'zone-2', 'zone-3']) expect(text).toContain(`*${name}*`);
    expect(text).not.toContain('zone-9'); // not active
    expect(text).toContain('Hourly prices in EUR');
    expect(text.match(/:star: cheapest/g)?.length).toBe(1);
    expect(text).toMatch(/\d+\.\d{4} EUR\/h · \d+\.\d{2} EUR\/mo/);
  });

  it('cluster <name>: Shape A status, every price including unknown fields', async () => {
    const [answer] = await answers(await h.command('cluster zone-3'));
    const text = json(answer?.blocks);
    expect(text).toContain('status: active');
    expect(text).toContain('gpu hour: 0.9000');
    expect(text).toContain('pbs pool');
    expect(text).toContain('Other fields: features: [\\"gpu\\"]');
  });

  it('cluster <name>: falls back to Shape B when Shape A does not answer', async () => {
    h.sim.fault('getA', { kind: 'status', status: 404, times: 1 });
    const [answer] = await answers(await h.command('cluster zone-1'));
    const text = json(answer?.blocks);
    expect(text).toContain('*zone-1* · Frankfurt');
    expect(text).not.toContain('status:');
  });

  it('cluster <name>: after the answer, the cluster’s price history as a chart shared in the channel', async () => {
    const result = await h.command('cluster zone-2', USERS.dev, CHANNELS.random);
    await answers(result);
    // Charts of earlier commands may still be uploading: this one is zone-2's, in the channel it was asked in.
    const file = await h.slack.waitFor(
      () => h.slack.files().find((f) => f.channel === CHANNELS.random && f.filename.includes('zone-2')),
      30_000,
    );
    expect(file.threadTs).toBeUndefined();
    expect(file.bytes?.subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);
    expect(pngHeader(file.bytes ?? Buffer.alloc(0))).toMatchObject({ width: 1200, height: 600 });
    expect(file.filename).toMatch(/^price-history-zone-2-\d{4}-\d{2}-\d{2}\.png$/);
    expect(file.altText).toMatch(/^zone-2: reference VM, monthly cost in EUR .* on \d+ \w+\./);
    // The answer went out before the upload started.
    const id = result.responseUrl.split('/').at(-1);
    const answeredAt = h.slack.responses.find((r) => r.id === id)?.at.getTime() ?? Number.NaN;
    const askedAt =
      h.slack
        .callsOf('files.getUploadURLExternal')
        .find((c) => c.args.filename === file.filename)
        ?.at.getTime() ?? Number.NaN;
    expect(answeredAt).toBeLessThanOrEqual(askedAt);
    const shared = h.slack.messages(CHANNELS.random).find((m) => m.files?.some((f) => f.id === file.id));
    expect(shared?.text).toContain(`asked for by <@${USERS.dev}>`);
  });

  it('cluster <name>: a chart Slack does not take leaves the answer and says why', async () => {
    // A conversation the bot is not in: Slack answers not_in_channel when the file is shared there.
    h.slack.leaveChannel('C0NOBOT');
    const [answer, note] = await answers(await h.command('cluster zone-1', USERS.dev, 'C0NOBOT'), 2);
    expect(json(answer?.blocks)).toContain('*zone-1*');
    expect(note?.text).toContain('No price chart');
    expect(note?.text).toContain('/invite @cloudops');
  });

  it('cluster <unknown>: says which clusters exist', async () => {
    const [answer] = await answers(await h.command('cluster zone-42'));
    expect(answer?.text).toBe(
      ':warning: No active cluster is called `zone-42`. Active clusters: `zone-1`, `zone-2`, `zone-3`.',
    );
  });

  it('an API failure is one clear sentence', async () => {
    h.sim.fault('getA', { kind: 'status', status: 503, times: 1 });
    h.sim.fault('getB', {
      kind: 'body',
      status: 502,
      body: '<html><body>Bad gateway</body></html>',
      times: 1,
    });
    const [answer] = await answers(await h.command('cluster zone-2'));
    expect(answer?.text).toMatch(
      /^:warning: The cloud API could not be read \([^<>]+\)\. Please try again in a minute\.$/,
    );
  });
});

describe('/cloud digest', () => {
  it('refuses an unknown time zone and a bad or too frequent cron in the ack', async () => {
    const tz = await h.command('digest daily 09:00 Mars/Olympus');
    expect(tz.json?.text).toContain('unknown time zone `Mars/Olympus`');
    const bad = await h.command('digest cron "61 * * * *"');
    expect(bad.json?.text).toContain('is not a cron expression');
    const often = await h.command('digest cron "* * * * *"');
    expect(often.json?.text).toContain('more often than once every 60 minutes');
  });

  it('subscribes, lists, replaces, sends one now, and unsubscribes', async () => {
    const [sub] = await answers(
      await h.command('digest daily 09:00 Europe/Paris', USERS.dev, CHANNELS.staging),
    );
    expect(sub?.response_type).toBe('in_channel');
    expect(sub?.text).toContain(
      'subscribed this channel to the pricing digest, daily at 09:00 (Europe/Paris)',
    );
    await h.command('digest weekly fri 17:30', USERS.dev, CHANNELS.staging);
    const [list] = await answers(await h.command('digest list', USERS.dev, CHANNELS.staging));
    expect(list?.text).toContain('every Friday at 17:30 (UTC)');

    await answers(await h.command('digest now', USERS.dev, CHANNELS.staging));
    const digest = await h.slack.waitFor(
      () => h.slack.messages(CHANNELS.staging).find((m) => (m.text ?? '').startsWith('Pricing digest')),
      30_000,
    );
    expect(json(digest.blocks)).toContain('First digest in this channel');

    const [off] = await answers(await h.command('digest off', USERS.dev, CHANNELS.staging));
    expect(off?.text).toContain('stopped this channel’s pricing digest');
    const [none] = await answers(await h.command('digest list', USERS.dev, CHANNELS.staging));
    expect(none?.text).toContain('This channel has no pricing digest');
  });

  it('digest now is throttled per channel: 30 commands make one digest and one API call, the others say when (issue 17.9)', async () => {
    const channel = CHANNELS.random;
    const isDigest = (m: { text?: string }) => (m.text ?? '').startsWith('Pricing digest');
    const listCalls = () => h.sim.calls.filter((c) => c.route === 'list').length;
    const callsBefore = listCalls();
    const results: CommandResult[] = [];
    for (let i = 0; i < 30; i += 1) results.push(await h.command('digest now', USERS.dev, channel));
    const bodies = (await Promise.all(results.map((r) => answers(r)))).map((b) => b[0]);
    const queued = bodies.filter((b) => b?.text?.startsWith('A pricing digest is on its way'));
    const refused = bodies.filter((b) => b?.text?.startsWith(':hourglass:'));
    expect(queued).toHaveLength(1);
    expect(refused).toHaveLength(29);
    for (const body of [...queued, ...refused]) {
      expect(body?.response_type).toBe('ephemeral');
      // When the next one may be asked for: ten minutes after the first, as a Slack date.
      expect(body?.text).toMatch(/The next one may be asked for from <!date\^\d+\^/);
    }
    const first = Number(/<!date\^(\d+)\^/.exec(queued[0]?.text ?? '')?.[1]);
    expect(first * 1000 - h.clock.now().getTime()).toBeGreaterThan(9 * 60_000);
    await h.slack.waitFor(() => h.slack.messages(channel).find(isDigest), 30_000);
    // Long enough for 29 more digests to have been posted, had they been queued.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(h.slack.messages(channel).filter(isDigest)).toHaveLength(1);
    expect(listCalls() - callsBefore).toBe(1);
    // Another channel has its own allowance.
    const [other] = await answers(await h.command('digest now', USERS.dev, CHANNELS.prod));
    expect(other?.text).toMatch(/^A pricing digest is on its way/);
  });

  it('help lists the pricing words', async () => {
    const help = await h.command('help');
    for (const word of ['/cloud clusters', '/cloud cluster <name>', '/cloud digest daily']) {
      expect(help.json?.text).toContain(word);
    }
  });
});
