import { afterAll, afterEach, beforeAll, expect, it, vi } from 'vitest';
import { reportRows, reportSummary } from '../../src/cli/report/rows.ts';
import { enqueueExecution } from '../../src/jobs/queues.ts';
import { breakGlassDecision, sealDecision } from '../../src/requests/approval/decision-seal.ts';
import type { AuditRecord } from '../../src/requests/model/audit-record.ts';
import { type CloudRequest, revisionOf } from '../../src/requests/model/types.ts';
import { auditRecords } from '../helpers/audit-records.ts';
import { CHANNELS, type Harness, STAGING_UUID, startHarness, USERS } from '../helpers/harness.ts';
import { TEST_SEAL_KEYS } from '../helpers/seal.ts';
import { type TestVerificationLinks, testVerificationLinks } from '../helpers/verification-links.ts';
import {
  approveEphemeral,
  submitRequest,
  urlButtonOf,
  verifiedPolicyYaml,
} from '../helpers/verified-approvals.ts';

// Break glass under a `verify:` rule (docs/approvals.md#break-glass-under-a-verify-rule): where a request's approvals
// must be verified, so must the break glass that runs it during a freeze. The reason form opens as elsewhere; its
// submission runs nothing and answers the breaker alone with a link; the link, completed with the breaker's passkey,
// records the break glass (sealed with the verification) and the work runs. The worker refuses a break glass that
// is not verified, or whose verification was added after it was sealed.
const PUBLIC_URL = 'https://cloudops.example.com';
const HOUR = 3_600_000;
const BREAKER = USERS.admin;
const SECOND_BREAKER = USERS.lead2;
const START = new Date('2026-11-25T09:00:00Z');

/** "2026-11-25T09:00" in UTC, as the policy writes local times. */
const wall = (date: Date) => date.toISOString().slice(0, 16);

/** shop-frozen (VM 201, staging channel): one approval verified by a passkey, frozen for two days; `breakers` may. */
const policy = (breakers: string[]) =>
  verifiedPolicyYaml({
    approvals: { count: 1 },
    staging: {
      name: 'shop-frozen',
      freeze: `{ from: "${wall(new Date(START.getTime() - HOUR))}", to: "${wall(new Date(START.getTime() + 48 * HOUR))}", tz: UTC, reason: release week }`,
    },
    more: `break_glass: [${breakers.join(', ')}]\n`,
  });

let h: Harness;
let links: TestVerificationLinks;
beforeAll(async () => {
  links = testVerificationLinks(PUBLIC_URL);
  h = await startHarness({
    role: 'all',
    now: START,
    policyFile: true,
    policyYaml: policy([BREAKER, SECOND_BREAKER]),
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

/** The POSTs the cloud sim received for the request resizing VM 201 to `cores` (each test's requests differ in it). */
const postsFor = (request: CloudRequest) => {
  const cores = request.params.kind === 'resize' ? request.params.target.cores : undefined;
  return h.sim.applied.filter(
    (a) => a.projectUuid === STAGING_UUID && (a.body as { cores?: number }).cores === cores,
  ).length;
};
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

/**
 * "Run now (break glass)" clicked and its form submitted with `reason` by `user`: the form closes, and the bot answers
 * them alone with an ephemeral message carrying the link. Returns that message and the link's claims.
 */
async function breakGlassLink(request: CloudRequest, reason: string, user: string = BREAKER) {
  const views = h.slack.views.length;
  const seen = h.slack.ephemerals(CHANNELS.staging, user).length;
  await h.click('break_glass', request.id, user, CHANNELS.staging);
  const form = await h.openedView(views);
  expect(form.view).toMatchObject({ callback_id: 'break_glass', private_metadata: request.id });
  const submitted = await h.submitView(form.view, { break_glass_reason: reason }, user);
  expect(submitted.json).toEqual({ response_action: 'clear' });
  const message = await h.slack.waitFor(() => h.slack.ephemerals(CHANNELS.staging, user)[seen]);
  const url = urlButtonOf(message.blocks) ?? '';
  const issued = links.issued.find((link) => link.url === url);
  if (issued?.kind !== 'break_glass') throw new Error('no break-glass link was issued');
  return { message, url, claims: issued.claims };
}

it('the form opens, its submission runs nothing and answers the breaker alone with a link; the passkey runs the work once, audited with the method', async () => {
  const frozen = await frozenVerified(2);
  const channelBefore = h.slack.messages(CHANNELS.staging).length;
  const { message, url, claims } = await breakGlassLink(frozen, 'hotfix for the outage');
  expect(url.startsWith(`${PUBLIC_URL}/verify/`)).toBe(true);
  expect(url).not.toContain('hotfix');
  expect(claims).toEqual({
    requestId: frozen.id,
    version: revisionOf(frozen),
    approver: BREAKER,
    teamId: frozen.teamId,
    methods: ['passkey'],
    reason: 'hotfix for the outage',
  });
  expect(message.text).toContain(`Your break glass of request ${frozen.id}`);
  expect(JSON.stringify(message.blocks)).toContain('> hotfix for the outage');
  // Nothing ran, nothing was recorded, and the link went to the breaker alone.
  const still = await h.store.get(frozen.id);
  expect(still).toMatchObject({ state: 'frozen' });
  expect(still?.breakGlass).toBeUndefined();
  expect(postsFor(frozen)).toBe(0);
  expect(JSON.stringify(h.slack.messages(CHANNELS.staging).slice(channelBefore))).not.toContain(url);

  expect(await links.complete(url, { method: 'passkey', subject: 'cred-admin' })).toMatchObject({ ok: true });
  const done = await h.waitForRequest(frozen.id, (r) => r.state === 'succeeded', 20_000);
  expect(postsFor(frozen)).toBe(1);
  expect(done.breakGlass).toMatchObject({
    by: BREAKER,
    reason: 'hotfix for the outage',
    verified: { method: 'passkey', subject: 'cred-admin' },
    revision: revisionOf(frozen),
  });
  expect(done.breakGlass?.seal).toMatch(/^[0-9a-f]{12}\./);
  expect(await h.auditOf(frozen.id)).toContain(
    `queued ${BREAKER} break glass (verified: passkey, credential cred-admin): hotfix for the outage`,
  );
  const thread = await h.requestMessage(frozen.id, (m) =>
    JSON.stringify(m.blocks).includes('Run during the freeze'),
  );
  expect(JSON.stringify(thread.blocks)).toContain(
    `Run during the freeze by <@${BREAKER}> (verified: passkey)`,
  );

  // The report counts it among break glasses, and says who broke glass, how they proved it and why.
  const records = (await auditRecords(h.redis, h.prefix)) as unknown as AuditRecord[];
  const rows = reportRows(records, {
    from: new Date(START.getTime() - HOUR),
    to: new Date(h.clock.now().getTime() + HOUR),
  });
  expect(rows.find((row) => row.request === frozen.id)).toMatchObject({
    breakGlass: true,
    breakGlassBy: `${BREAKER} (passkey cred-admin): hotfix for the outage`,
  });
  expect(reportSummary(rows).breakGlass).toBeGreaterThanOrEqual(1);

  // The link again, and its claims handed over past the link store: nothing runs twice.
  expect(await links.complete(url, { method: 'passkey', subject: 'cred-admin' })).toBe('used');
  expect(await links.replayBreakGlass(claims, { method: 'passkey', subject: 'cred-admin' })).toMatchObject({
    ok: false,
    refusal: { code: 'already' },
  });
  expect(postsFor(frozen)).toBe(1);
});

it('a request that changed between form and page refuses the link: another breaker ran it first, it was cancelled, or its freeze ended', async () => {
  const frozen = await frozenVerified(3);
  const first = await breakGlassLink(frozen, 'first', BREAKER);
  const second = await breakGlassLink(frozen, 'second', SECOND_BREAKER);
  expect(await links.complete(second.url, { method: 'passkey', subject: 'cred-lead2' })).toMatchObject({
    ok: true,
  });
  expect(await links.complete(first.url, { method: 'passkey', subject: 'cred-admin' })).toMatchObject({
    ok: false,
    refusal: { code: 'already' },
  });
  const done = await h.waitForRequest(frozen.id, (r) => r.state === 'succeeded', 20_000);
  expect(done.breakGlass).toMatchObject({ by: SECOND_BREAKER, reason: 'second' });
  expect(postsFor(frozen)).toBe(1);

  const cancelled = await frozenVerified(4);
  const link = await breakGlassLink(cancelled, 'cannot wait');
  await h.click('cancel', cancelled.id, USERS.dev, CHANNELS.staging);
  await h.waitForRequest(cancelled.id, (r) => r.state === 'cancelled');
  expect(await links.complete(link.url, { method: 'passkey', subject: 'cred-admin' })).toMatchObject({
    ok: false,
    refusal: { code: 'already' },
  });
  expect((await h.store.get(cancelled.id))?.breakGlass).toBeUndefined();
  expect(postsFor(cancelled)).toBe(0);

  // Released by its freeze's end (the lifecycle's move then: frozen → queued) before the link is used.
  const released = await frozenVerified(15);
  const late = await breakGlassLink(released, 'just before the end');
  const ended = await h.store.transition(
    released.id,
    { from: ['frozen'], to: 'queued', actor: 'cloudops', detail: 'the freeze ended' },
    released,
  );
  expect(ended.ok).toBe(true);
  expect(await links.complete(late.url, { method: 'passkey', subject: 'cred-admin' })).toMatchObject({
    ok: false,
    refusal: { code: 'already' },
  });
  expect((await h.store.get(released.id))?.breakGlass).toBeUndefined();
});

it('a frozen request whose revision moved in Redis after the link was issued refuses it', async () => {
  const frozen = await frozenVerified(5);
  const { url } = await breakGlassLink(frozen, 'urgent');
  const key = `${h.prefix}:req:${frozen.id}`;
  const stored = JSON.parse((await h.redis.get(key)) as string) as CloudRequest;
  await h.redis.set(key, JSON.stringify({ ...stored, revision: revisionOf(stored) + 1 }));
  expect(await links.complete(url, { method: 'passkey', subject: 'cred-admin' })).toMatchObject({
    ok: false,
    refusal: { code: 'verification_stale' },
  });
  const still = await h.store.get(frozen.id);
  expect(still?.state).toBe('frozen');
  expect(still?.breakGlass).toBeUndefined();
  expect(postsFor(frozen)).toBe(0);
});

it('a breaker removed from break_glass by a policy reload before using the link is refused, nothing sent', async () => {
  const frozen = await frozenVerified(6);
  const { url, claims } = await breakGlassLink(frozen, 'before the reload');
  expect(await h.reloadPolicy(policy([SECOND_BREAKER]))).toBe('changed');
  try {
    expect(await links.complete(url, { method: 'passkey', subject: 'cred-admin' })).toMatchObject({
      ok: false,
      refusal: { code: 'not_break_glass' },
    });
    // Claims naming someone the policy never let break glass fare no better.
    expect(
      await links.replayBreakGlass(
        { ...claims, approver: USERS.lead },
        { method: 'passkey', subject: 'cred-lead' },
      ),
    ).toMatchObject({ ok: false, refusal: { code: 'not_break_glass' } });
  } finally {
    expect(await h.reloadPolicy(policy([BREAKER, SECOND_BREAKER]))).toBe('changed');
  }
  const still = await h.store.get(frozen.id);
  expect(still?.state).toBe('frozen');
  expect(still?.breakGlass).toBeUndefined();
  expect(postsFor(frozen)).toBe(0);
});

it('a typed reason with mrkdwn, a secret and control characters is scrubbed and cleaned in the claims, and quoted in the message', async () => {
  const frozen = await frozenVerified(7);
  const typed = `<!channel> *urgent* \u202Egnp.exe\u0007 token ${h.slack.botToken} <https://evil.example|click>`;
  const { message, claims } = await breakGlassLink(frozen, typed);
  expect(claims.reason).not.toContain(h.slack.botToken);
  expect(claims.reason).toContain('[redacted]');
  expect(claims.reason).not.toContain('\u202E');
  expect(claims.reason).not.toContain('\u0007');
  const shown = JSON.stringify(message);
  expect(shown).not.toContain(h.slack.botToken);
  expect(shown).not.toContain('<!channel>');
  expect(shown).not.toContain('<https://evil.example');
  expect(shown).toContain('&lt;!channel&gt;');
  expect(JSON.stringify(h.logs)).not.toContain(h.slack.botToken);
});

it('a verification by a method the rule does not name, or with a subject that is no credential id, records nothing', async () => {
  const frozen = await frozenVerified(8);
  const { url, claims } = await breakGlassLink(frozen, 'wrong method');
  expect(await links.complete(url, { method: 'sso', subject: 'sub-admin' })).toMatchObject({
    ok: false,
    refusal: { code: 'verification_mismatch' },
  });
  const subject = 'cred-admin\n<!channel>';
  expect(await links.replayBreakGlass(claims, { method: 'passkey', subject })).toMatchObject({
    ok: false,
    refusal: { code: 'verification_mismatch' },
  });
  const still = await h.store.get(frozen.id);
  expect(still?.state).toBe('frozen');
  expect(still?.breakGlass).toBeUndefined();
});

/** Writes `breakGlass` onto frozen `request` as a Redis writer would, queued with its job. */
async function writeBreakGlass(request: CloudRequest, breakGlass: CloudRequest['breakGlass']) {
  const queued = await h.store.transition(
    request.id,
    { from: ['frozen'], to: 'queued', actor: BREAKER, patch: { breakGlass }, detail: 'break glass: forged' },
    request,
  );
  if (!queued.ok) throw new Error('the request did not move to queued');
  await enqueueExecution(h.queues, queued.request, h.clock.now());
  return h.waitForRequest(request.id, (r) => ['succeeded', 'refused', 'unknown'].includes(r.state), 20_000);
}

it('a sealed break glass without verification, written into Redis, is refused by the worker, nothing sent', async () => {
  const frozen = await frozenVerified(10);
  // What an old client holding SEAL_KEY writes: a sealed, unverified break glass, the request queued with its job.
  const at = h.clock.now().toISOString();
  const revision = revisionOf(frozen);
  const seal = sealDecision(TEST_SEAL_KEYS, frozen, breakGlassDecision(BREAKER, at, revision));
  const ended = await writeBreakGlass(frozen, { by: BREAKER, reason: 'forged', at, revision, seal });
  expect(ended.state).toBe('refused');
  expect(ended.outcomes.at(-1)?.reason).toContain('break glass');
  expect(ended.outcomes.at(-1)?.reason).toContain('not verified');
  expect(postsFor(frozen)).toBe(0);
});

it('a verification added in Redis to a sealed unverified break glass breaks its seal: seal_invalid, nothing sent', async () => {
  const frozen = await frozenVerified(11);
  const at = h.clock.now().toISOString();
  const revision = revisionOf(frozen);
  const seal = sealDecision(TEST_SEAL_KEYS, frozen, breakGlassDecision(BREAKER, at, revision));
  const verified = { method: 'passkey' as const, subject: 'cred-admin' };
  const ended = await writeBreakGlass(frozen, {
    by: BREAKER,
    reason: 'forged',
    at,
    revision,
    seal,
    verified,
  });
  expect(ended.state).toBe('refused');
  expect(ended.outcomes.at(-1)?.reason).toContain(`the break glass recorded for ${BREAKER}`);
  expect(
    (await h.auditOf(frozen.id)).some((line) => line.startsWith('seal_invalid cloudops Not sent:')),
  ).toBe(true);
  expect(postsFor(frozen)).toBe(0);
});

it('a verified break glass copied onto another frozen request (its seal and verification) is seal_invalid there', async () => {
  const source = await frozenVerified(12);
  const target = await frozenVerified(13);
  const { url } = await breakGlassLink(source, 'the real one');
  expect(await links.complete(url, { method: 'passkey', subject: 'cred-admin' })).toMatchObject({ ok: true });
  const ran = await h.waitForRequest(source.id, (r) => r.state === 'succeeded', 20_000);
  const ended = await writeBreakGlass(target, ran.breakGlass);
  expect(ended.state).toBe('refused');
  expect(
    (await h.auditOf(target.id)).some((line) => line.startsWith('seal_invalid cloudops Not sent:')),
  ).toBe(true);
  expect(postsFor(target)).toBe(0);
});

it('a frozen request moved to queued in Redis without a break glass is held by the worker until the freeze ends', async () => {
  const frozen = await frozenVerified(14);
  const before = stagingPosts();
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
  expect(stagingPosts()).toBe(before);
});
