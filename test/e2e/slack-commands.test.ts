import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CHANNELS, type Harness, startHarness, testSlackMode, USERS } from '../helpers/harness.ts';
import {
  blockActionsPayload,
  interactionBody,
  slackSignature,
  slashCommandBody,
} from '../helpers/slack-request.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ role: 'web' });
});
afterEach(() => {
  expect(h.slack.problems).toEqual([]);
});
afterAll(async () => {
  console.info(
    `slack-commands: ${h.slack.calls.length} Web API calls, ${h.slack.responses.length} response_url posts, ${h.acksChecked} acks checked`,
  );
  await h?.close();
});

describe('/cloud words', () => {
  it('help, and an empty command, list the words ephemerally', async () => {
    for (const text of ['help', '']) {
      const answer = await h.command(text);
      expect(answer.status).toBe(200);
      expect(answer.json?.response_type).toBe('ephemeral');
      const usage = String(answer.json?.text);
      for (const word of [
        '/cloud resize',
        '/cloud restore',
        '/cloud jobs',
        '/cloud clusters',
        '/cloud digest',
        '/cloud help',
      ]) {
        expect(usage).toContain(word);
      }
    }
  });

  it('an unknown word names the words that exist', async () => {
    const answer = await h.command('reboot shop-prod 101');
    expect(answer.json?.response_type).toBe('ephemeral');
    expect(answer.json?.text).toMatch(
      /^:warning: Unknown word `reboot`\. Try one of: `resize`, `restore`, `jobs`, .*`help`\.$/,
    );
    expect(h.slack.views).toHaveLength(0);
  });

  it('a mistake in the options is explained without opening a form', async () => {
    const answer = await h.command('resize shop-prod 101 cores=two');
    expect(answer.json?.text).toBe(':warning: `cores` takes a whole number, not `two`');
    // The last of two values must not win silently.
    for (const twice of [
      'wan=off wan=dual',
      'cpu=light cpu=regular',
      'private=on private=off',
      'cores=2 cores=4',
    ]) {
      const key = twice.split('=')[0];
      expect((await h.command(`resize shop-prod 104 ${twice}`)).json?.text).toBe(
        `:warning: \`${key}\` is given twice`,
      );
    }
    expect(h.slack.views).toHaveLength(0);
  });

  it('a project not bound to the channel is refused, naming its channels', async () => {
    const answer = await h.command('resize shop-staging 201 cores=2');
    expect(answer.json?.text).toBe('Not from this channel: shop-staging can be operated in <#C0STAGE>.');
    const nowhere = await h.command('resize', USERS.dev, CHANNELS.random);
    expect(nowhere.json?.text).toBe(
      'No project is operated from this channel. Projects live in <#C0PROD>, <#C0STAGE>.',
    );
    expect(h.slack.views).toHaveLength(0);
  });

  it('/cloud jobs lists this channel’s requests with their state and who acted', async () => {
    const empty = await h.command('jobs', USERS.dev, CHANNELS.staging);
    expect(empty.status).toBe(200);
    await h.slack.waitFor(() =>
      h.slack.responses.find((r) => r.body.text === 'No requests in this channel yet.'),
    );

    await h.fillAndSubmit('resize shop-prod 102 cores=6', { reason: 'load' });
    const request = await h.waitForRequest((await h.nextRequest()).id, (r) => r.state === 'pending');
    await h.click('approve', request.id, USERS.lead);
    await h.waitForRequest(request.id, (r) => r.state === 'queued');
    const seen = h.slack.responses.length;
    await h.command('jobs');
    const listed = await h.slack.waitFor(() => h.slack.responses.slice(seen)[0]);
    expect(listed.body.response_type).toBe('ephemeral');
    const text = JSON.stringify(listed.body.blocks);
    expect(text).toContain(request.id);
    expect(text).toContain('Queued');
    expect(text).toContain(`approved by <@${USERS.lead}>`);
    expect(text).toContain('Cores: 4 → 6');
  });
});

describe('restore', () => {
  it('needs the VM id typed again; a wrong id is a field error; then a request is made', async () => {
    const view = await h.openModal('restore shop-prod 102 daily-1');
    const inputs = (view.blocks as { block_id?: string }[]).map((b) => b.block_id);
    expect(inputs).toContain('autostart');
    const wrong = await h.submitView(view, { confirm: ['stopped'], typed_vmid: '101' }, USERS.dev);
    expect(wrong.json).toEqual({
      response_action: 'errors',
      errors: {
        typed_vmid:
          'Type the VM id 102 again, exactly, to confirm that its disk is overwritten (typed: "101").',
      },
    });
    const right = await h.submitView(
      view,
      { confirm: ['stopped'], typed_vmid: '102', autostart: ['autostart'] },
      USERS.dev,
    );
    expect(right.json).toEqual({ response_action: 'clear' });
    const request = await h.waitForRequest((await h.nextRequest()).id, (r) => r.state === 'pending');
    expect(request.params).toEqual({
      kind: 'restore',
      backupSlug: 'daily-1',
      autostart: true,
      confirmedStopped: true,
    });
  });

  it('an HA VM is offered no autostart, and a forged autostart is refused', async () => {
    const before = (await h.requests()).length;
    const view = await h.openModal('restore shop-prod 101 daily-1');
    const blocks = view.blocks as Record<string, unknown>[];
    expect(blocks.map((b) => b.block_id)).not.toContain('autostart');
    // A client that adds the checkbox back anyway.
    const forged = {
      ...view,
      blocks: [
        ...blocks,
        {
          type: 'input',
          block_id: 'autostart',
          label: { type: 'plain_text', text: 'x' },
          element: {
            type: 'checkboxes',
            action_id: 'autostart',
            options: [{ text: { type: 'plain_text', text: 'x' }, value: 'autostart' }],
          },
        },
      ],
    };
    const refused = await h.submitView(
      forged,
      { confirm: ['stopped'], typed_vmid: '101', autostart: ['autostart'] },
      USERS.dev,
    );
    expect(refused.json?.response_action).toBe('errors');
    expect(JSON.stringify(refused.json?.errors)).toContain('Autostart is not allowed for VM 101');
    expect((await h.requests()).length).toBe(before);
  });

  it('a backup slug with a path in it is refused', async () => {
    const view = await h.openModal('restore shop-prod 102');
    const answer = await h.submitView(
      view,
      { backup_slug: '../../etc', confirm: ['stopped'], typed_vmid: '102' },
      USERS.dev,
    );
    expect(answer.json?.response_action).toBe('errors');
    expect(JSON.stringify(answer.json?.errors)).toContain('backup_slug');
  });
});

describe('who may talk to the bot', () => {
  // Socket Mode has no signatures: the app-level token opens the socket.
  it.skipIf(testSlackMode() === 'socket')(
    'a forged, stale or missing signature gets 401 and does nothing',
    async () => {
      const body = slashCommandBody(
        { user: USERS.dev, channel: CHANNELS.prod, teamId: 'T0TEST' },
        {
          text: 'resize shop-prod 102',
          triggerId: h.slack.triggerId(),
          responseUrl: h.slack.responseUrl({ channel: CHANNELS.prod }),
        },
      );
      const calls = h.slack.calls.length;
      const forged = await h.send(body, { secret: 'not-the-secret' });
      const stale = await h.send(body, { timestamp: Math.floor(Date.now() / 1000) - 6 * 60 });
      const unsigned = await h.send(body, { unsigned: true });
      const now = Math.floor(Date.now() / 1000);
      // Signed for another body: a tampered payload.
      const tampered = await h.send(body.replace('resize', 'restore'), {
        timestamp: now,
        signature: slackSignature(h.signingSecret, now, body),
      });
      expect([forged.status, stale.status, unsigned.status, tampered.status]).toEqual([401, 401, 401, 401]);
      const fresh = await h.send(interactionBody({ type: 'block_actions' }), { timestamp: now - 6 * 60 });
      expect(fresh.status).toBe(401);
      await new Promise((r) => setTimeout(r, 100));
      expect(h.slack.calls.length).toBe(calls);
    },
  );

  it('a request from another workspace is refused', async () => {
    const answer = await h.command('resize shop-prod 102', USERS.dev, CHANNELS.prod, 'T0OTHER');
    expect(answer.json).toEqual({
      response_type: 'ephemeral',
      text: 'cloudops is not set up for this workspace.',
    });
    const views = h.slack.views.length;
    await new Promise((r) => setTimeout(r, 100));
    expect(h.slack.views.length).toBe(views);

    // A click from the other workspace on a real request of this one changes nothing.
    await h.fillAndSubmit('resize shop-prod 102 cores=12', {});
    const request = await h.waitForRequest((await h.nextRequest()).id, (r) => r.state === 'pending');
    const payload = blockActionsPayload(
      { user: USERS.lead, channel: CHANNELS.prod, teamId: 'T0OTHER' },
      {
        actionId: 'approve',
        value: request.id,
        triggerId: h.slack.triggerId(),
        responseUrl: h.slack.responseUrl({ channel: CHANNELS.prod }),
      },
    );
    const click = await h.interaction(payload);
    expect(click.status).toBe(200);
    await new Promise((r) => setTimeout(r, 200));
    expect(await h.store.get(request.id)).toEqual(request);
    expect(await h.queues.execute.getJob(request.id)).toBeUndefined();
  });
});

describe('secrets', () => {
  it('the bot token, signing secret and API key appear in no log line and no Slack payload', async () => {
    const everything = [
      ...h.logs,
      ...h.slack.calls.map((c) => JSON.stringify(c.args)),
      ...h.slack.responses.map((r) => JSON.stringify(r.body)),
    ].join('\n');
    for (const secret of [h.slack.botToken, h.signingSecret, h.sim.apiKey])
      expect(everything).not.toContain(secret);
  });
});

describe('the command line and the limits', () => {
  it('numbers beyond the limits are refused on the command line with the limit, and no form opens (issue 17.7)', async () => {
    const viewsBefore = h.slack.views.length;
    // The harness policy's limits: cores 32, RAM 256, disk 2000; the modal's VM id input takes 12 digits.
    const refusals: [string, string][] = [
      [
        'resize shop-prod 101 disk=999999999999',
        "`disk` must be at most 2000 (the policy's limit), not `999999999999`",
      ],
      [
        'resize shop-prod 101 cores=99999999',
        "`cores` must be at most 32 (the policy's limit), not `99999999`",
      ],
      ['resize shop-prod 101 ram=257', "`ram` must be at most 256 (the policy's limit), not `257`"],
      [
        `resize shop-prod 101 disk=${'9'.repeat(400)}`,
        `\`disk\` must be at most 2000 (the policy's limit), not \`${'9'.repeat(24)}…\``,
      ],
      ['resize shop-prod 1234567890123 cores=4', 'the VM id has at most 12 digits, not `1234567890123`'],
      ['restore shop-prod 1234567890123', 'the VM id has at most 12 digits, not `1234567890123`'],
    ];
    for (const [text, message] of refusals) {
      const answer = await h.command(text);
      expect(answer.status, text).toBe(200);
      expect(answer.json?.response_type, text).toBe('ephemeral');
      expect(answer.json?.text, text).toBe(`:warning: ${message}`);
    }
    expect(h.slack.views).toHaveLength(viewsBefore);

    // At the limits the form opens, prefilled, and every prefilled number fits its input.
    const view = await h.openModal('resize shop-prod 101 cores=32 ram=256 disk=2000');
    const inputs = (view.blocks as { block_id: string; element?: Record<string, unknown> }[]).filter(
      (b) => b.element?.type === 'plain_text_input',
    );
    const initial = Object.fromEntries(inputs.map((b) => [b.block_id, b.element?.initial_value]));
    expect(initial).toMatchObject({ cores: '32', ram_gb: '256', os_disk_gb: '2000', vmid: '101' });
    for (const block of inputs) {
      const value = block.element?.initial_value;
      if (typeof value === 'string')
        expect(value.length, block.block_id).toBeLessThanOrEqual(Number(block.element?.max_length));
    }
    const restore = await h.openModal('restore shop-prod 999999999999');
    expect(JSON.stringify(restore)).toContain('"initial_value":"999999999999"');
  });
});
