import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { FunctionExecution } from '../../sim/slack/server.ts';
import { CHANNELS, type Harness, startHarness, USERS } from '../helpers/harness.ts';
import { deliverEvent, functionExecuted, runStep, workflowUser } from '../helpers/slack-events.ts';

// The whole bot: steps are started by signed function_executed events and completed by the workers.
let h: Harness;
beforeAll(async () => {
  h = await startHarness({ role: 'all' });
});
afterEach(() => {
  expect(h.slack.problems).toEqual([]);
});
afterAll(async () => {
  const completions = [
    ...h.slack.callsOf('functions.completeSuccess'),
    ...h.slack.callsOf('functions.completeError'),
  ];
  console.info(`slack-steps: ${completions.length} step completions, each checked against its method file`);
  await h?.close();
});

const resizeInputs = (extra: Record<string, unknown> = {}) => ({
  project: 'shop-prod',
  vm_id: 102,
  cores: 6,
  reason: 'Black Friday',
  channel: CHANNELS.prod,
  requester: workflowUser(USERS.dev),
  ...extra,
});

const restoreInputs = (extra: Record<string, unknown> = {}) => ({
  project: 'shop-prod',
  vm_id: 102,
  backup: 'daily-1',
  autostart: false,
  vm_stopped: true,
  channel: CHANNELS.prod,
  requester: workflowUser(USERS.dev),
  ...extra,
});

/** The step run once the bot completed or failed it. */
function ended(run: FunctionExecution, timeoutMs = 10_000): Promise<FunctionExecution> {
  return h.slack.waitFor(() => {
    const now = h.slack.execution(run.id);
    return now && now.state !== 'running' ? now : undefined;
  }, timeoutMs);
}

describe('Workflow Builder steps', () => {
  it('"Request a VM resize" waits for the approval, then completes with the request id and its final state', async () => {
    const run = await runStep(h, 'request_vm_resize', resizeInputs());
    const request = await h.waitForRequest((await h.nextRequest()).id, (r) => r.state === 'pending');
    expect(request.requester).toBe(USERS.dev);
    expect(request.workflowStep).toEqual({ callbackId: 'request_vm_resize', executionId: run.id });
    expect(h.slack.execution(run.id)?.state).toBe('running');
    const message = await h.requestMessage(request.id);
    await h.click('approve', request.id, USERS.lead, CHANNELS.prod, message);
    const done = await ended(run);
    expect(done).toMatchObject({
      state: 'completed',
      outputs: { request_id: request.id, state: 'succeeded' },
    });
    // Completed with the step's own token, which is then forgotten; it never reached the logs.
    await expect.poll(() => h.redis.exists(`${h.prefix}:step-token:${run.id}`)).toBe(0);
    expect(h.logs.join('\n')).not.toContain(run.token);
    expect(h.sim.applied.filter((a) => a.vmid === 102)).toHaveLength(1);
  });

  it('"Request a VM restore" completes with the restore task id', async () => {
    const run = await runStep(h, 'request_vm_restore', restoreInputs());
    const request = await h.waitForRequest((await h.nextRequest()).id, (r) => r.state === 'pending');
    await h.click('approve', request.id, USERS.lead2, CHANNELS.prod, await h.requestMessage(request.id));
    const done = await ended(run);
    expect(done.state).toBe('completed');
    expect(done.outputs).toMatchObject({ request_id: request.id, state: 'succeeded' });
    expect(String(done.outputs?.task_id ?? '')).not.toBe('');
  });

  it('a rejected request fails its step with who rejected it and why', async () => {
    const run = await runStep(h, 'request_vm_resize', resizeInputs({ cores: 8 }));
    const request = await h.waitForRequest((await h.nextRequest()).id, (r) => r.state === 'pending');
    const seen = h.slack.views.length;
    await h.click('reject', request.id, USERS.lead2, CHANNELS.prod, await h.requestMessage(request.id));
    const modal = (await h.openedView(seen)).view;
    await h.submitView(modal, { reject_reason: 'Not during the sale' }, USERS.lead2);
    const done = await ended(run);
    expect(done).toMatchObject({
      state: 'failed',
      error: `Request ${request.id} was rejected by ${USERS.lead2}: Not during the sale. Nothing was sent to the API.`,
    });
  });

  it('a request the API refuses fails its step with the API’s reason in one sentence', async () => {
    h.sim.fault('resize', {
      kind: 'status',
      status: 400,
      body: JSON.stringify({ detail: 'Not enough capacity in zone-1.' }),
      contentType: 'application/json',
    });
    const run = await runStep(h, 'request_vm_resize', resizeInputs({ cores: 10 }));
    const request = await h.waitForRequest((await h.nextRequest()).id, (r) => r.state === 'pending');
    await h.click('approve', request.id, USERS.lead, CHANNELS.prod, await h.requestMessage(request.id));
    const done = await ended(run);
    expect(done.state).toBe('failed');
    expect(done.error).toBe(`The API refused request ${request.id}: Not enough capacity in zone-1.`);
  });

  it('inputs that break a rule fail the step at once with the rule’s sentence, and nothing is asked', async () => {
    const before = (await h.requests()).length;
    const ha = await ended(
      await runStep(h, 'request_vm_restore', restoreInputs({ vm_id: 101, autostart: true })),
    );
    expect(ha.state).toBe('failed');
    expect(ha.error).toContain('Autostart is not allowed for VM 101: it is a high-availability VM.');
    const shrink = await ended(
      await runStep(h, 'request_vm_resize', resizeInputs({ cores: undefined, os_disk_gb: 10 })),
    );
    expect(shrink.state).toBe('failed');
    expect(shrink.error).toMatch(/disk/i);
    const elsewhere = await ended(
      await runStep(h, 'request_vm_resize', resizeInputs({ channel: CHANNELS.staging })),
    );
    expect(elsewhere.error).toBe('shop-prod can be operated in <#C0PROD>.');
    expect((await h.requests()).length).toBe(before);
    expect((await h.requests(CHANNELS.staging)).filter((r) => r.workflowStep)).toEqual([]);
  });

  it('a second delivery of the same run makes no second request', async () => {
    const run = h.slack.startFunction('request_vm_resize', resizeInputs({ cores: 12 }));
    // The same execution id and token delivered twice, as Slack retries an event it saw no answer to.
    const event = functionExecuted(h.slack.teamId, run);
    await Promise.all([deliverEvent(h, event), deliverEvent(h, { ...event })]);
    await h.nextRequest();
    // Time for a second request to be stored, had the second delivery made one.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const made = (await h.requests()).filter((r) => r.workflowStep?.executionId === run.id);
    expect(made).toHaveLength(1);
  });

  it('the requester is the person who ran the workflow (user_context): an approver who runs it cannot approve it', async () => {
    const run = await runStep(
      h,
      'request_vm_resize',
      resizeInputs({ vm_id: 104, cores: 4, requester: workflowUser(USERS.lead) }),
    );
    const request = await h.waitForRequest((await h.nextRequest()).id, (r) => r.state === 'pending');
    expect(request.requester).toBe(USERS.lead);
    const message = await h.requestMessage(request.id);
    await h.click('approve', request.id, USERS.lead, CHANNELS.prod, message);
    await expect
      .poll(() => h.slack.ephemerals(CHANNELS.prod, USERS.lead).at(-1)?.text ?? '')
      .toMatch(/own request/i);
    expect((await h.waitForRequest(request.id, () => true)).state).toBe('pending');
    await h.click('approve', request.id, USERS.lead2, CHANNELS.prod, message);
    expect((await ended(run)).outputs).toMatchObject({ request_id: request.id, state: 'succeeded' });
    // Nothing was said of the run's secret.
    expect(h.logs.join('\n')).not.toContain((run.inputs.requester as { secret: string }).secret);
  });

  it('a requester given as a plain user id fails the step (a builder could type anyone), and nothing is asked', async () => {
    const before = (await h.requests()).length;
    for (const requester of [USERS.dev, { id: USERS.dev }, { secret: 'x' }, undefined]) {
      const run = await ended(await runStep(h, 'request_vm_resize', resizeInputs({ cores: 7, requester })));
      expect(run.state).toBe('failed');
      expect(run.error).toBe(
        'The step needs the requester as the person who runs the workflow (a user context), not a user id a builder chose.',
      );
    }
    expect((await h.requests()).length).toBe(before);
  });

  it('a step whose inputs are null fails with what is missing, not a database error', async () => {
    const run = h.slack.startFunction('request_vm_resize', {});
    const event = functionExecuted(h.slack.teamId, run);
    (event.event as Record<string, unknown>).inputs = null;
    await deliverEvent(h, event);
    const done = await ended(run);
    expect(done.state).toBe('failed');
    expect(done.error).toBe(
      'The step needs the requester as the person who runs the workflow (a user context), not a user id a builder chose.',
    );
    expect(h.logs.join('\n')).not.toContain('could not be read');
  });
});
