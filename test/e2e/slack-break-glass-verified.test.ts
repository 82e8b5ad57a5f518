import { afterAll, afterEach, beforeAll, expect, it, vi } from 'vitest';
import { enqueueExecution } from '../../src/jobs/queues.ts';
import { breakGlassDecision, sealDecision } from '../../src/requests/approval/decision-seal.ts';
import { type CloudRequest, revisionOf } from '../../src/requests/model/types.ts';
import { breakGlassModal } from '../../src/slack/blocks/modals.ts';
import { CHANNELS, type Harness, STAGING_UUID, startHarness, USERS } from '../helpers/harness.ts';
import { TEST_SEAL_KEYS } from '../helpers/seal.ts';
import { type TestVerificationLinks, testVerificationLinks } from '../helpers/verification-links.ts';
import {
  approveEphemeral,
  submitRequest,
  urlButtonOf,
  verifiedPolicyYaml,
} from '../helpers/verified-approvals.ts';

// Break glass under a `verify:` rule (docs/approvals.md#break-glass-under-a-verify-rule): a Slack click proves
// nobody, so it cannot run frozen work whose approvals the policy asks to be verified. Slack refuses it and says how
// to proceed; the worker refuses a break glass recorded for such a request however it got into Redis.
const PUBLIC_URL = 'https://cloudops.example.com';
const HOUR = 3_600_000;
const BREAKER = USERS.admin;

/** "2026-11-25T09:00" in UTC, as the policy writes local times. */
const wall = (date: Date) => date.toISOString().slice(0, 16);

let h: Harness;
let links: TestVerificationLinks;
beforeAll(async () => {
  links = testVerificationLinks(PUBLIC_URL);
  h = await startHarness({
    role: 'all',
    now: new Date('2026-11-25T09:00:00Z'),
    // shop-frozen (VM 201, staging channel): one approval verified by a passkey, frozen for two days.
    policyYaml: (start) =>
      verifiedPolicyYaml({
        approvals: { count: 1 },
        staging: {
          name: 'shop-frozen',
          freeze: `{ from: "${wall(new Date(start.getTime() - HOUR))}", to: "${wall(new Date(start.getTime() + 48 * HOUR))}", tz: UTC, reason: release week }`,
        },
        more: `break_glass: [${BREAKER}]\n`,
      }),
    env: () => ({ PUBLIC_URL }),
    startOptions: { verificationLinks: links.factory },
  });
});
afterEach(() => {
  expect(h.slack.problems).toEqual([]);
});
afterAll(async () => {
  await h?.close();
});

const stagingPosts = () => h.sim.applied.filter((a) => a.projectUuid === STAGING_UUID).length;

/** A resize of VM 201 approved with a passkey, held by the freeze. */
async function frozenVerified(cores: number): Promise<CloudRequest> {
  const created = await submitRequest(h, `resize shop-frozen 201 cores=${cores}`, CHANNELS.staging);
  expect(created.verify).toEqual(['passkey']);
  const url = urlButtonOf((await approveEphemeral(h, created.id, USERS.lead, CHANNELS.staging)).blocks);
  expect(await links.complete(url ?? '', { method: 'passkey', subject: 'cred-lead' })).toMatchObject({
    ok: true,
  });
  return h.waitForRequest(created.id, (r) => r.state === 'frozen');
}

it('a plain break-glass click under a verify: rule opens no form, says how to proceed, and sends nothing', async () => {
  const frozen = await frozenVerified(2);
  const views = h.slack.views.length;
  const seen = h.slack.ephemerals(CHANNELS.staging, BREAKER).length;
  await h.click('break_glass', frozen.id, BREAKER, CHANNELS.staging);
  const told = await h.slack.waitFor(() => h.slack.ephemerals(CHANNELS.staging, BREAKER)[seen]);
  expect(told.text).toBe(
    `Request \`${frozen.id}\` needs approvals verified by passkey, and break glass from Slack is not verified: it cannot run now. It runs by itself when the freeze ends; if it cannot wait, cancel it and ask an admin to end the freeze in the policy, then make a new request.`,
  );
  expect(h.slack.views.slice(views).filter((v) => v.method !== 'views.update')).toEqual([]);

  // A form opened before (an old client's, or one left open) is refused on submit all the same.
  const modal = breakGlassModal(frozen.id, 'staging-1') as unknown as Record<string, unknown>;
  const submitted = await h.submitView(modal, { break_glass_reason: 'hotfix for the outage' }, BREAKER);
  expect(submitted.json).toMatchObject({ response_action: 'errors' });
  expect(JSON.stringify(submitted.json)).toContain('break glass from Slack is not verified');

  const still = await h.store.get(frozen.id);
  expect(still).toMatchObject({ state: 'frozen' });
  expect(still?.breakGlass).toBeUndefined();
  expect(stagingPosts()).toBe(0);
});

it('a break glass written into Redis for a request under a verify: rule is refused by the worker, nothing sent', async () => {
  const frozen = await frozenVerified(3);
  // What an old client holding SEAL_KEY writes: a sealed, unverified break glass, the request queued with its job.
  const at = h.clock.now().toISOString();
  const revision = revisionOf(frozen);
  const seal = sealDecision(TEST_SEAL_KEYS, frozen, breakGlassDecision(BREAKER, at, revision));
  const queued = await h.store.transition(
    frozen.id,
    {
      from: ['frozen'],
      to: 'queued',
      actor: BREAKER,
      patch: { breakGlass: { by: BREAKER, reason: 'forged', at, revision, seal } },
      detail: 'break glass: forged',
    },
    frozen,
  );
  expect(queued.ok).toBe(true);
  if (!queued.ok) return;
  await enqueueExecution(h.queues, queued.request, h.clock.now());
  const ended = await h.waitForRequest(
    frozen.id,
    (r) => ['succeeded', 'refused', 'unknown'].includes(r.state),
    20_000,
  );
  expect(ended.state).toBe('refused');
  expect(ended.outcomes.at(-1)?.reason).toContain('break glass');
  expect(ended.outcomes.at(-1)?.reason).toContain('passkey');
  expect(stagingPosts()).toBe(0);
});

it('a frozen request moved to queued in Redis without a break glass is held by the worker until the freeze ends', async () => {
  const frozen = await frozenVerified(4);
  // What a Redis writer without SEAL_KEY can do: move the approved, frozen request on and add its job.
  const queued = await h.store.transition(
    frozen.id,
    { from: ['frozen'], to: 'queued', actor: 'cloudops', detail: 'moved by hand' },
    frozen,
  );
  expect(queued.ok).toBe(true);
  if (!queued.ok) return;
  await enqueueExecution(h.queues, queued.request, h.clock.now());
  await vi.waitFor(
    async () =>
      expect(
        (await h.auditOf(frozen.id)).some((line) => line.startsWith('queued cloudops held by the freeze')),
      ).toBe(true),
    { timeout: 20_000, interval: 100 },
  );
  expect((await h.store.get(frozen.id))?.state).toBe('queued');
  expect(stagingPosts()).toBe(0);
});
