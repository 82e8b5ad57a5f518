import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SIM_REASONS } from '../../sim/cloud/rules.ts';
import { parsePolicy } from '../../src/config/policy.ts';
import { AuditLog } from '../../src/requests/audit/audit.ts';
import { PROJECT, restoreRequest } from '../fixtures/requests.ts';
import {
  JOBS_POLICY_YAML,
  type JobsEnv,
  resizeOf,
  startJobsEnv,
  threadTexts,
  waitForReplies,
} from './jobs-env.ts';

let env: JobsEnv;

beforeEach(async () => {
  env = await startJobsEnv({ name: 'jobs-exec' });
});

afterEach(async () => {
  expect(env.slack.problems).toEqual([]);
  await env.close();
});

function resizeCalls() {
  return env.sim.calls.filter((c) => c.route === 'resize');
}

describe('execution: success', () => {
  it('resizes through the API, replies in the thread, updates the message and records the VM facts', async () => {
    env.startWorkers();
    const request = await env.queueRequest(resizeOf(env, 102, { cores: 6, ramGb: 12 }));
    const done = await env.waitForState(request.id, ['succeeded', 'refused', 'unknown']);
    expect(done.state).toBe('succeeded');
    expect(env.sim.vm(PROJECT.uuid, 102)).toMatchObject({ cores: 6, ramGb: 12 });
    expect(resizeCalls()).toHaveLength(1);
    expect(resizeCalls()[0]?.body).toEqual({ cores: 6, ram_gb: 12 });

    const replies = await waitForReplies(env, request.id, 1);
    expect(replies[0]).toMatch(/^:white_check_mark: Done: /);
    expect(replies[0]).toContain(done.outcomes[0]?.message ?? 'missing');
    // The message's ts as stored once the reply is there: the request can reach its end before it is written.
    const messageTs = (await env.store.get(request.id))?.messageTs;
    const message = await env.slack.waitFor(() =>
      env.slack.messages('C0PROD').find((m) => m.ts === messageTs && m.edits > 0 && m.text?.includes('Done')),
    );
    expect(message.thread_ts).toBeUndefined();

    const facts = await env.vmFacts.get(PROJECT.uuid, 102);
    expect(facts).toMatchObject({ cores: 6, ramGb: 12 });
    expect(facts?.lastIncreaseAt?.toISOString()).toBe(done.outcomes[0]?.at);

    const audit = await new AuditLog(env.redis, env.prefix).read({ requestId: request.id });
    expect(audit.map((e) => `${e.state}:${e.actor}`)).toEqual([
      'created:U0DEV',
      'pending:U0DEV',
      'approved:U0LEAD',
      'queued:cloudops',
      'sending:cloudops',
      'succeeded:cloudops',
    ]);
    expect(
      audit.every((e) => ['created', 'pending', 'queued'].includes(e.state) || (e.detail ?? '').length > 0),
    ).toBe(true);
    const succeededJobs = async () =>
      (await env.metrics.jobs.get()).values.find(
        (v) => v.labels.queue === 'execute' && v.labels.outcome === 'succeeded',
      )?.value;
    await expect.poll(succeededJobs, { timeout: 30_000 }).toBe(1);
  });

  it('restores a backup and replies with the task id', async () => {
    env.startWorkers();
    const request = await env.queueRequest(
      restoreRequest({
        vmid: 102,
        params: { kind: 'restore', backupSlug: 'daily-1', autostart: false, confirmedStopped: true },
      }),
    );
    const done = await env.waitForState(request.id, ['succeeded', 'refused', 'unknown']);
    expect(done.state).toBe('succeeded');
    const taskId = done.outcomes[0]?.taskId;
    expect(taskId).toBeTruthy();
    const replies = await waitForReplies(env, request.id, 1);
    expect(replies[0]).toContain(`\`${taskId}\``);
  });

  it('runs a WAN two-step plan in order: off, then the target', async () => {
    env.startWorkers();
    const request = await env.queueRequest(
      resizeOf(env, 101, { wanMode: 'ipv6' }, { steps: [{ wanMode: 'off' }, { wanMode: 'ipv6' }] }),
    );
    const done = await env.waitForState(request.id, ['succeeded', 'refused', 'unknown']);
    expect(done.state).toBe('succeeded');
    expect(resizeCalls().map((c) => c.body)).toEqual([{ wan_mode: 'off' }, { wan_mode: 'ipv6' }]);
    expect(env.sim.vm(PROJECT.uuid, 101)?.wanMode).toBe('ipv6');
    expect(done.nextStep).toBe(2);
    const replies = await waitForReplies(env, request.id, 2);
    expect(replies[0]).toMatch(/^Step 1 of 2 done/);
    expect(replies[1]).toMatch(/^:white_check_mark: Done/);
    expect((await env.vmFacts.get(PROJECT.uuid, 101))?.wanMode).toBe('ipv6');
  });
});

describe('execution: refusals', () => {
  const cases = [
    {
      name: 'lowering cores of a running VM',
      vmid: 101,
      target: { cores: 1 },
      reason: SIM_REASONS.lowerRunning,
    },
    {
      name: 'shrinking the OS disk',
      vmid: 102,
      target: { osDiskGb: 50 },
      reason: SIM_REASONS.diskShrink(100),
    },
    {
      name: 'a direct WAN switch',
      vmid: 104,
      target: { wanMode: 'ipv4' as const },
      reason: SIM_REASONS.wanSwitch('dual', 'ipv4'),
    },
    { name: 'lowering within 24 hours of creation', vmid: 103, target: { cores: 2 }, reason: /24 hours/ },
  ];
  for (const c of cases) {
    it(`ends refused with the API's reason: ${c.name}`, async () => {
      env.startWorkers();
      const request = await env.queueRequest(resizeOf(env, c.vmid, c.target));
      const done = await env.waitForState(request.id, ['succeeded', 'refused', 'unknown']);
      expect(done.state).toBe('refused');
      const reason = done.outcomes[0]?.reason ?? '';
      if (typeof c.reason === 'string') expect(reason).toContain(c.reason);
      else expect(reason).toMatch(c.reason);
      const replies = await waitForReplies(env, request.id, 1);
      expect(replies[0]).toContain(':x: The API refused this:');
      expect(resizeCalls()).toHaveLength(1);
      const audit = await new AuditLog(env.redis, env.prefix).read({ requestId: request.id });
      expect(audit.at(-1)).toMatchObject({ state: 'refused', actor: 'cloudops' });
    });
  }

  it('refuses autostart of an HA VM on restore', async () => {
    env.startWorkers();
    const request = await env.queueRequest(
      restoreRequest({
        vmid: 101,
        params: { kind: 'restore', backupSlug: 'daily-1', autostart: true, confirmedStopped: true },
      }),
    );
    const done = await env.waitForState(request.id, ['succeeded', 'refused', 'unknown']);
    expect(done.state).toBe('refused');
    expect(done.outcomes[0]?.reason).toMatch(/stopped|high-availability/);
  });
});

describe('execution: scheduled downsize', () => {
  it('runs at its time, re-checked against the rules then', async () => {
    const runAt = new Date(Date.now() + 1_500);
    const policy = parsePolicy(
      `${JOBS_POLICY_YAML}    vms:\n      - { vmid: 102, cores: 4, ram_gb: 8, os_disk_gb: 100 }\n`,
    );
    env.startWorkers({ policy });
    const request = await env.queueRequest(resizeOf(env, 102, { cores: 2 }, { runAt: runAt.toISOString() }));
    const done = await env.waitForState(request.id, ['succeeded', 'refused', 'unknown']);
    expect(done.state).toBe('succeeded');
    expect(resizeCalls()).toHaveLength(1);
    // Not before its time (later is only the machine's load): the call arrived at or after runAt.
    expect(resizeCalls()[0]!.at.getTime()).toBeGreaterThanOrEqual(runAt.getTime());
    expect(new Date(done.outcomes[0]?.at ?? 0).getTime()).toBeGreaterThanOrEqual(runAt.getTime() - 50);
    expect((await env.vmFacts.get(PROJECT.uuid, 102))?.lastIncreaseAt).toBeUndefined();
  });

  it('is not sent when the rules still refuse it at its time', async () => {
    const createdAt = new Date(Date.now() - 2 * 3_600_000).toISOString();
    const policy = parsePolicy(
      `${JOBS_POLICY_YAML}    vms:\n      - { vmid: 103, cores: 4, ram_gb: 8, created_at: "${createdAt}" }\n`,
    );
    env.startWorkers({ policy });
    const request = await env.queueRequest(
      resizeOf(env, 103, { cores: 2 }, { runAt: new Date(Date.now() + 300).toISOString() }),
    );
    const done = await env.waitForState(request.id, ['succeeded', 'refused', 'unknown']);
    expect(done.state).toBe('refused');
    expect(done.outcomes[0]?.reason).toMatch(/^Not sent: at its scheduled time the rules do not allow it/);
    expect(resizeCalls()).toHaveLength(0);
    const replies = await waitForReplies(env, request.id, 1);
    expect(replies[0]).toContain('Not sent');
    expect(threadTexts(env, done)).toHaveLength(1);
  });
});
