import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { STALE_FORM, TAMPERED_FORM } from '../../src/slack/views/draft-submission.ts';
import { CHANNELS, type Harness, PROD_UUID, startHarness, USERS } from '../helpers/harness.ts';

// The web role only: requests are stored and queued, and no worker runs them while the test looks.
let h: Harness;
beforeAll(async () => {
  h = await startHarness({ role: 'web' });
});
afterEach(() => {
  expect(h.slack.problems).toEqual([]);
});
afterAll(async () => {
  console.info(
    `slack-resize: ${h.slack.calls.length} Web API calls, ${h.slack.responses.length} response_url posts, ${h.acksChecked} acks checked`,
  );
  await h?.close();
});

type Errors = Record<string, string>;
const errorsOf = (json: Record<string, unknown> | undefined): Errors => {
  expect(json?.response_action).toBe('errors');
  return json?.errors as Errors;
};

describe('resize modal', () => {
  it('opens prefilled from the command and what the bot knows of the VM', async () => {
    const view = await h.openModal('resize shop-prod 102 cores=6');
    expect(view.callback_id).toBe('resize');
    const blocks = view.blocks as {
      block_id?: string;
      element?: { initial_value?: string; initial_option?: { value: string } };
    }[];
    const byId = (id: string) => blocks.find((b) => b.block_id === id)?.element;
    expect(byId('project')?.initial_option?.value).toBe('shop-prod');
    expect(byId('vmid')?.initial_value).toBe('102');
    expect(byId('cores')?.initial_value).toBe('6');
    expect(byId('ram_gb')?.initial_value).toBe('8');
    expect(byId('wan_mode')?.initial_option?.value).toBe('ipv4');
    // The draft is sealed into the modal (HMAC): opening the form wrote nothing to Redis.
    expect(view.private_metadata).toMatch(/^d2\.[\w-]{8}\.[\w-]+\.[\w-]{43}$/);
    expect(await h.redis.keys(`${h.prefix}:draft:*`)).toEqual([]);
  });

  it('a valid resize becomes a pending request, posted through the notify queue, with a cost preview', async () => {
    const before = (await h.requests()).length;
    const ack = await h.fillAndSubmit('resize shop-prod 102 cores=6', { reason: 'Black Friday' });
    expect(ack.json).toEqual({ response_action: 'clear' });
    const request = await h.nextRequest();
    expect((await h.requests()).length).toBe(before + 1);
    expect(request).toMatchObject({
      state: 'pending',
      requester: USERS.dev,
      projectUuid: PROD_UUID,
      vmid: 102,
      reason: 'Black Friday',
      needsApproval: true,
      approvers: [USERS.lead, USERS.lead2],
    });
    expect(request.params).toMatchObject({ kind: 'resize', steps: [{ cores: 6 }] });
    expect(request.cost).toMatchObject({ cluster: 'zone-1', currency: 'EUR' });
    expect(await h.queues.notify.getJob(`post-request.${request.id}`)).toBeDefined();
    expect(await h.queues.execute.getJob(request.id)).toBeUndefined();
  });
});

describe('rules the modal knows come back as field errors', () => {
  it('24-hour rule: lowering a VM created two hours ago offers the earliest allowed time, and schedules it', async () => {
    const before = (await h.requests()).length;
    const ack = await h.fillAndSubmit('resize shop-prod 103 cores=2', { confirm: ['stopped'] });
    expect(ack.json?.response_action).toBe('push');
    const pushed = ack.json?.view as Record<string, unknown>;
    expect(pushed.callback_id).toBe('resize_schedule');
    // Created two hours ago: allowed 22 hours from now; scheduled on the next whole minute plus a minute's margin
    // for the API's clock, which is also the minute the rule's message names.
    const exact = h.clock.now().getTime() + 22 * 3_600_000;
    const allowedAt = new Date(Math.ceil(exact / 60_000) * 60_000 + 60_000);
    const ruleMinute = new Date(Math.ceil(exact / 60_000) * 60_000)
      .toISOString()
      .slice(0, 16)
      .replace('T', ' ');
    expect(JSON.stringify(pushed.blocks)).toContain(`Cores can be lowered from ${ruleMinute} UTC`);
    expect(JSON.stringify(pushed.blocks)).toContain(`<!date^${allowedAt.getTime() / 1000}^`);
    expect((await h.requests()).length).toBe(before);

    const scheduled = await h.submitView(pushed, {}, USERS.dev);
    expect(scheduled.json).toEqual({ response_action: 'clear' });
    const request = await h.nextRequest();
    expect(request).toMatchObject({ vmid: 103, state: 'pending', runAt: allowedAt.toISOString() });
    expect(request.params).toMatchObject({ steps: [{ cores: 2 }] });
  });

  it('lowering cores without confirming the VM is stopped', async () => {
    const errors = errorsOf((await h.fillAndSubmit('resize shop-prod 102 cores=2', {})).json);
    expect(errors).toEqual({
      confirm: expect.stringContaining('Lowering cores or RAM needs the VM stopped'),
    });
  });

  it('lowering RAM alone without confirming the VM is stopped (no cores change to hide it)', async () => {
    const before = (await h.requests()).length;
    const errors = errorsOf((await h.fillAndSubmit('resize shop-prod 102 ram=4', {})).json);
    expect(errors).toEqual({
      confirm: expect.stringContaining('Lowering cores or RAM needs the VM stopped'),
    });
    expect(errors.confirm).toContain('8 GB');
    expect(errors.cores).toBeUndefined();
    expect((await h.requests()).length).toBe(before);
    // Confirmed, the same change is a request.
    const ack = await h.fillAndSubmit('resize shop-prod 102 ram=4', { confirm: ['stopped'] });
    expect(ack.json).toEqual({ response_action: 'clear' });
    const request = await h.nextRequest();
    expect(request.params).toMatchObject({ steps: [{ ramGb: 4 }], confirmedStopped: true });
  });

  it('a shrinking OS disk', async () => {
    const errors = errorsOf((await h.fillAndSubmit('resize shop-prod 102 disk=60', {})).json);
    expect(errors).toEqual({
      os_disk_gb: expect.stringContaining('The OS disk cannot shrink: the minimum allowed is 100 GB'),
    });
  });

  it('a direct WAN switch, and the two-step plan once it is accepted', async () => {
    const errors = errorsOf((await h.fillAndSubmit('resize shop-prod 101 wan=ipv6', {})).json);
    expect(errors).toEqual({ wan_mode: expect.stringContaining('cannot switch directly from ipv4 to ipv6') });
    const ack = await h.fillAndSubmit('resize shop-prod 101 wan=ipv6', { confirm: ['wan_two_step'] });
    expect(ack.json).toEqual({ response_action: 'clear' });
    const request = await h.nextRequest();
    expect(request.params).toMatchObject({ steps: [{ wanMode: 'off' }, { wanMode: 'ipv6' }] });
  });

  it('numbers out of bounds or not whole', async () => {
    const errors = errorsOf(
      (await h.fillAndSubmit('resize shop-prod 102', { cores: '999', ram_gb: '2.5' })).json,
    );
    expect(errors.cores).toContain('must be from 1 to 32');
    expect(errors.ram_gb).toContain('takes a whole number');
  });

  it('a project of another channel chosen in the modal', async () => {
    const view = await h.openModal('resize');
    const select = (view.blocks as { block_id?: string; element?: { options?: { value: string }[] } }[]).find(
      (b) => b.block_id === 'project',
    );
    // Only the channel's projects are offered; a forged option is refused on submit.
    expect(select?.element?.options?.map((o) => o.value)).toEqual(['shop-prod']);
    select?.element?.options?.push({
      value: 'shop-staging',
      text: { type: 'plain_text', text: 'x' },
    } as never);
    const errors = errorsOf(
      (await h.submitView(view, { project: 'shop-staging', vmid: '201', cores: '2' }, USERS.dev)).json,
    );
    expect(errors).toEqual({ project: 'Choose one of the projects this channel may operate.' });
  });
});

describe('what the client sends back is not trusted', () => {
  it('a tampered private_metadata, or another person submitting the form, creates nothing', async () => {
    const before = (await h.requests()).length;
    const view = await h.openModal('resize shop-prod 102 cores=6');
    const forged = { ...view, private_metadata: '00000000-0000-4000-8000-000000000000' };
    expect(errorsOf((await h.submitView(forged, {}, USERS.dev)).json).project).toContain(
      'expired or was already submitted',
    );
    expect(errorsOf((await h.submitView(view, {}, USERS.dev2)).json).project).toContain(
      'expired or was already submitted',
    );
    expect((await h.requests()).length).toBe(before);
  });

  it('a sealed draft changed by the client (another requester, another channel) is refused as changed', async () => {
    const before = (await h.requests()).length;
    const view = await h.openModal('resize shop-prod 102 cores=6');
    const [version, keyId, body, mac] = String(view.private_metadata).split('.');
    const draft = JSON.parse(Buffer.from(body ?? '', 'base64url').toString()) as Record<string, unknown>;
    for (const change of [{ user: USERS.dev2 }, { channel: CHANNELS.staging }]) {
      const forgedBody = Buffer.from(JSON.stringify({ ...draft, ...change })).toString('base64url');
      const forged = { ...view, private_metadata: `${version}.${keyId}.${forgedBody}.${mac}` };
      const submitter = change.user ?? USERS.dev;
      expect(errorsOf((await h.submitView(forged, {}, submitter)).json).project).toBe(TAMPERED_FORM);
    }
    expect((await h.requests()).length).toBe(before);
  });

  it('a form opened before the signing secret was rotated is refused as expired, not as changed', async () => {
    // The same deployment after the rotation: another bot whose seal key comes from another signing secret.
    const rotated = await startHarness({ role: 'web' });
    try {
      const view = await h.openModal('resize shop-prod 102 cores=6');
      const before = (await rotated.requests()).length;
      expect(errorsOf((await rotated.submitView(view, {}, USERS.dev)).json).project).toBe(STALE_FORM);
      expect((await rotated.requests()).length).toBe(before);
    } finally {
      await rotated.close();
    }
  });

  it('a replayed submission creates one request', async () => {
    const before = (await h.requests()).length;
    const view = await h.openModal('resize shop-prod 102 cores=8');
    const [a, b] = await Promise.all([h.submitView(view, {}, USERS.dev), h.submitView(view, {}, USERS.dev)]);
    const actions = [a.json?.response_action, b.json?.response_action].sort();
    expect(actions).toEqual(['clear', 'errors']);
    // The accepted one is stored after its ack (Slack's 3 s): wait for it, then see that no second one follows.
    await vi.waitFor(async () => expect((await h.requests()).length).toBe(before + 1), { timeout: 10_000 });
    await new Promise((r) => setTimeout(r, 500));
    expect((await h.requests()).length).toBe(before + 1);
  });
});

describe('no approval needed', () => {
  it('a staging resize is queued at once with the request id as job id', async () => {
    const ack = await h.fillAndSubmit('resize shop-staging 201 cores=2', {}, USERS.dev, CHANNELS.staging);
    expect(ack.json).toEqual({ response_action: 'clear' });
    const created = await h.nextRequest(CHANNELS.staging);
    const request = await h.waitForRequest(created.id, (r) => r.state !== 'pending');
    expect(request).toMatchObject({ state: 'queued', needsApproval: false });
    const job = await h.waitForJob(request.id);
    // The job carries the VM too, so the worker takes the VM's lock before reading the request, and the request as the
    // write that queued it stored it, from which the run's start predicts its move to sending.
    expect(job?.data).toEqual({
      requestId: request.id,
      vm: { projectUuid: request.projectUuid, vmid: request.vmid },
      request: expect.objectContaining({ id: request.id, state: 'queued', version: request.version }),
    });
  });
});

// Last in the file: it moves the shared clock two hours on.
describe('a form left open too long', () => {
  it('submitted more than two hours after it opened, it is refused as expired', async () => {
    const before = (await h.requests()).length;
    const view = await h.openModal('resize shop-prod 102 cores=6');
    h.clock.advance(2 * 3600_000 + 1000);
    expect(errorsOf((await h.submitView(view, {}, USERS.dev)).json).project).toBe(STALE_FORM);
    expect((await h.requests()).length).toBe(before);
  });
});
