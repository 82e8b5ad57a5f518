import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { enqueueExecution } from '../../src/jobs/queues.ts';
import { goAheadDecision, sealDecision } from '../../src/requests/approval/decision-seal.ts';
import type { CloudRequest, RequestState } from '../../src/requests/model/types.ts';
import { CHANNELS, defaultPolicyYaml, type Harness, startHarness, USERS } from '../helpers/harness.ts';
import { testRedisUrl } from '../helpers/redis.ts';
import { TEST_SEAL_KEY, TEST_SEAL_KEY_PREVIOUS, TEST_SEAL_KEYS } from '../helpers/seal.ts';
import { startWorkerProcess, type WorkerProcess } from '../helpers/worker-process.ts';

// The worker is the last judge (docs/approvals.md#sealed-decisions): the web role of a real bot takes the clicks and
// seals its decisions; a worker process of its own (its own policy and keys) runs the queue against the cloud sim.
// Whatever a Redis writer without SEAL_KEY does to a request, no POST leaves for it.

const HOUR_MS = 3_600_000;
let h: Harness;
let worker: WorkerProcess | undefined;

beforeAll(async () => {
  h = await startHarness({ role: 'web' });
});
afterEach(async () => {
  await worker?.kill('SIGTERM');
  worker = undefined;
});
afterAll(async () => {
  await worker?.kill();
  await h?.close();
});

/** Starts a worker process on the harness's Redis, cloud sim and Slack stand-in. */
async function startWorker(
  options: { policyYaml?: string; sealKey?: string; sealKeyPrevious?: string } = {},
): Promise<void> {
  worker = await startWorkerProcess({
    redisUrl: testRedisUrl(),
    prefix: h.prefix,
    cloudUrl: h.sim.url,
    cloudApiKey: h.sim.apiKey,
    slackApiUrl: h.slack.apiUrl,
    slackToken: h.slack.botToken,
    policyYaml: options.policyYaml ?? defaultPolicyYaml(h.clock.now()),
    ...(options.sealKey ? { sealKey: options.sealKey } : {}),
    ...(options.sealKeyPrevious ? { sealKeyPrevious: options.sealKeyPrevious } : {}),
  });
}

/** A fresh pending request made through the modal as U0DEV. */
async function pending(text: string, channel: string = CHANNELS.prod): Promise<CloudRequest> {
  const ack = await h.fillAndSubmit(text, {}, USERS.dev, channel);
  expect(ack.json).toEqual({ response_action: 'clear' });
  const created = await h.nextRequest(channel);
  return h.waitForRequest(created.id, (r) => r.state === (channel === CHANNELS.prod ? 'pending' : 'queued'));
}

/** A pending request approved by `approver` through the button: queued, its job waiting for a worker. */
async function approved(text: string, approver: string = USERS.lead): Promise<CloudRequest> {
  const request = await pending(text);
  expect(request.state).toBe('pending');
  await h.click('approve', request.id, approver);
  const queued = await h.waitForRequest(request.id, (r) => r.state === 'queued');
  await h.waitForJob(request.id);
  return queued;
}

/** Rewrites the stored request as a Redis writer would: parse, edit, write back. */
async function tamper(id: string, edit: (request: CloudRequest) => void): Promise<CloudRequest> {
  const key = `${h.prefix}:req:${id}`;
  const request = JSON.parse((await h.redis.get(key)) as string) as CloudRequest;
  edit(request);
  await h.redis.set(key, JSON.stringify(request));
  return request;
}

/** The POSTs the cloud sim received for a VM. */
function posts(vmid: number): number {
  return h.sim.calls.filter((c) => c.method === 'POST' && c.path.includes(`/${vmid}/`)).length;
}

async function ended(id: string, states: RequestState[] = ['succeeded', 'refused', 'unknown']) {
  return h.waitForRequest(id, (r) => states.includes(r.state), 20_000);
}

/** The request ended refused with nothing sent, its audit naming `seal_invalid` (or not), the reason in its outcome. */
async function expectRefused(id: string, sealInvalid: boolean): Promise<CloudRequest> {
  const done = await ended(id);
  expect(done.state).toBe('refused');
  expect(done.outcomes.at(-1)).toMatchObject({ notSent: true });
  const audit = await h.auditOf(id);
  expect(audit.some((line) => line.startsWith('seal_invalid cloudops Not sent:'))).toBe(sealInvalid);
  expect(audit.at(-1)).toMatch(/^refused cloudops Not sent:/);
  return done;
}

describe('a Redis writer without SEAL_KEY', () => {
  it('forged, moved, altered, replayed or stripped decisions send nothing; sealed ones still run', async () => {
    // The control: approved by the button, it runs (VM 104, which no attack touches).
    const control = await approved('resize shop-prod 104 cores=4');
    // "No approval needed" (shop-staging) runs on its sealed go-ahead.
    const free = await pending('resize shop-staging 201 cores=2', CHANNELS.staging);
    expect(free.state).toBe('queued');
    expect(free.goAhead?.seal).toMatch(/^[0-9a-f]{12}\./);

    // Its go-ahead deleted from a "no approval needed" request: nothing else lets it run.
    const stripped = await pending('resize shop-staging 201 ram=4', CHANNELS.staging);
    await tamper(stripped.id, (r) => {
      delete r.goAhead;
    });

    // (a) An approval forged the way the bot writes one: state, approvals, approvedBy, the BullMQ job.
    const forged = await pending('resize shop-prod 102 cores=6');
    const forgedNow = await tamper(forged.id, (r) => {
      r.approvals = [{ user: USERS.lead, at: h.clock.now().toISOString(), revision: 1 }];
      r.approvedBy = USERS.lead;
      r.state = 'queued';
      r.version += 1;
      r.revision = (r.revision ?? 1) + 1;
    });
    await enqueueExecution(h.queues, forgedNow, new Date());

    // A stored count of 0 with no approval at all: no sealed decision lets it run (the count stored is not read).
    const uncounted = await pending('resize shop-prod 102 cores=8');
    const uncountedNow = await tamper(uncounted.id, (r) => {
      r.requiredApprovals = 0;
      r.needsApproval = false;
      r.state = 'queued';
      r.version += 1;
      r.revision = (r.revision ?? 1) + 1;
    });
    await enqueueExecution(h.queues, uncountedNow, new Date());

    // The reviewer's bypass: a process holding SEAL_KEY but a permissive policy of its own ("no approval needed")
    // seals a go-ahead the bot's policy would never give. Its seal holds; the worker's own plan still needs 1.
    const permissive = await pending('resize shop-prod 102 ram=24');
    const permissiveNow = await tamper(permissive.id, (r) => {
      const decision = goAheadDecision(r, h.clock.now().toISOString());
      r.goAhead = {
        kind: 'no_approval',
        at: decision.at,
        revision: decision.revision,
        seal: sealDecision(TEST_SEAL_KEYS, r, decision),
      };
      r.requiredApprovals = 0;
      r.needsApproval = false;
      r.state = 'queued';
      r.version += 1;
      r.revision = (r.revision ?? 1) + 1;
    });
    await enqueueExecution(h.queues, permissiveNow, new Date());

    // (b) A real sealed approval (the control's) moved onto another pending request.
    const moved = await pending('resize shop-prod 102 cores=10');
    const movedNow = await tamper(moved.id, (r) => {
      r.approvals = control.approvals;
      r.approvedBy = USERS.lead;
      r.state = 'queued';
      r.version += 1;
      r.revision = control.revision;
    });
    await enqueueExecution(h.queues, movedNow, new Date());

    // Each real approval below is altered after it was sealed.
    const attacks: [string, CloudRequest][] = [];
    const alter = async (what: string, text: string, edit: (r: CloudRequest) => void) => {
      const request = await approved(text);
      await tamper(request.id, edit);
      attacks.push([what, request]);
    };
    await alter('params edited after the approval', 'resize shop-prod 102 cores=6', (r) => {
      if (r.params.kind === 'resize') {
        r.params.target = { cores: 16 };
        r.params.steps = [{ cores: 16 }];
      }
    });
    await alter(
      'another change of the request: a later scheduled time',
      'resize shop-prod 102 ram=12',
      (r) => {
        r.runAt = new Date(h.clock.now().getTime() + HOUR_MS).toISOString();
      },
    );
    await alter('approver swapped', 'resize shop-prod 102 cores=6', (r) => {
      const first = r.approvals?.[0];
      if (first) first.user = USERS.lead2;
    });
    await alter('revision changed', 'resize shop-prod 102 cores=6', (r) => {
      const first = r.approvals?.[0];
      if (first) first.revision = (first.revision ?? 1) + 1;
    });
    await alter('seal under another key id', 'resize shop-prod 102 cores=6', (r) => {
      const first = r.approvals?.[0];
      if (first?.seal) first.seal = `0123456789ab${first.seal.slice(12)}`;
    });
    await alter('seal deleted', 'resize shop-prod 102 cores=6', (r) => {
      delete r.approvals?.[0]?.seal;
    });
    await alter('seal emptied', 'resize shop-prod 102 cores=6', (r) => {
      const first = r.approvals?.[0];
      if (first) first.seal = '';
    });
    await alter('time of the approval moved later', 'resize shop-prod 102 cores=6', (r) => {
      const first = r.approvals?.[0];
      if (first) first.at = new Date(Date.parse(first.at) + HOUR_MS).toISOString();
    });

    // (c) Replayed after its validity: approved 25 hours before the worker's clock.
    h.clock.set(new Date(Date.now() - 25 * HOUR_MS));
    const stale = await approved('resize shop-prod 102 ram=16');
    h.clock.set(new Date());

    await startWorker();
    expect((await ended(control.id)).state).toBe('succeeded');
    expect((await ended(free.id)).state).toBe('succeeded');
    expect(posts(104)).toBe(1);
    expect(posts(201)).toBe(1);

    await expectRefused(forged.id, true);
    const none = await expectRefused(uncounted.id, true);
    expect(none.outcomes.at(-1)?.reason).toContain('no sealed decision lets it run');
    await expectRefused(moved.id, true);
    await expectRefused(stripped.id, true);
    const bypass = await expectRefused(permissive.id, false);
    expect(bypass.outcomes.at(-1)?.reason).toContain('it needs 1 approval');
    for (const [what, request] of attacks) {
      const done = await ended(request.id);
      expect(`${what}: ${done.state}`).toBe(`${what}: refused`);
      await expectRefused(request.id, true);
    }
    const replayed = await expectRefused(stale.id, true);
    expect(replayed.outcomes.at(-1)?.reason).toContain('approval_valid_hours');
    // Nothing reached the API for VM 102, and the thread of each says why.
    expect(posts(102)).toBe(0);
    const message = await h.requestMessage(forged.id);
    await h.slack.waitFor(() =>
      h.slack.thread(CHANNELS.prod, message.ts).some((m) => (m.text ?? '').includes('Not sent:')),
    );
  });
});

describe('the worker plans approvals under its own policy', () => {
  it('a policy tightened after the approval (2 needed, 1 given under the old one): refused, nothing sent', async () => {
    const request = await approved('resize shop-prod 102 cores=6');
    const tightened = defaultPolicyYaml(h.clock.now()).replace(
      `    approvers: [${USERS.lead}, ${USERS.lead2}]\n`,
      `    approvers: [${USERS.lead}, ${USERS.lead2}]\n    approvals: { count: 2 }\n`,
    );
    expect(tightened).toContain('count: 2');
    await startWorker({ policyYaml: tightened });
    const done = await expectRefused(request.id, false);
    expect(done.outcomes.at(-1)?.reason).toContain('it needs 2 approvals');
    expect(posts(102)).toBe(0);
  });

  it('an approver the worker policy no longer names does not count', async () => {
    const request = await approved('resize shop-prod 102 cores=6', USERS.lead2);
    const narrowed = defaultPolicyYaml(h.clock.now()).replace(
      `    approvers: [${USERS.lead}, ${USERS.lead2}]\n`,
      `    approvers: [${USERS.lead}]\n`,
    );
    await startWorker({ policyYaml: narrowed });
    const done = await expectRefused(request.id, false);
    expect(done.outcomes.at(-1)?.reason).toContain(`${USERS.lead2}, not an approver`);
    expect(posts(102)).toBe(0);
  });
});

describe('key rotation', () => {
  it('an approval sealed under the old key runs on a worker holding it as SEAL_KEY_PREVIOUS; not without it', async () => {
    const kept = await approved('resize shop-prod 102 cores=6');
    // A worker restarted with only the new key refuses what the old key sealed.
    await startWorker({ sealKey: TEST_SEAL_KEY_PREVIOUS });
    await expectRefused(kept.id, true);
    await worker?.kill('SIGTERM');

    const next = await approved('resize shop-prod 102 cores=8');
    await startWorker({ sealKey: TEST_SEAL_KEY_PREVIOUS, sealKeyPrevious: TEST_SEAL_KEY });
    expect((await ended(next.id)).state).toBe('succeeded');
    expect(posts(102)).toBe(1);
  });
});
