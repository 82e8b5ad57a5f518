import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request as http } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { OPEN_REGISTRATION_LINKS } from '../../src/verify/links.ts';
import { PasskeyStore } from '../../src/verify/passkeys.ts';
import { SESSIONS_PER_LINK } from '../../src/verify/sessions.ts';
import { auditRecords } from '../helpers/audit-records.ts';
import { CHANNELS, type Harness, TEAM, USERS } from '../helpers/harness.ts';
import { testRedisUrl } from '../helpers/redis.ts';
import { runProcess } from '../helpers/run-process.ts';
import { clickOnHome } from '../helpers/slack-events.ts';
import { PageTab, SoftPasskey } from '../helpers/soft-passkey.ts';
import {
  approveEphemeral,
  passkeyRegistrationLink,
  startVerifyPage,
  submitRequest,
  urlButtonOf,
  verifiedPolicyYaml,
} from '../helpers/verified-approvals.ts';
import type { Forwarder } from '../helpers/verify-browser.ts';

// Passkeys and their resets attacked as a hostile user would, over real HTTP against the whole bot: a software
// authenticator (test/helpers/soft-passkey.ts) registers and signs, so a test can keep a page open across a reset,
// reuse someone's credential id or leave out user verification. Without SSO: a first passkey is trusted on first use.

const policyYaml = () =>
  verifiedPolicyYaml({ approvers: [USERS.lead, USERS.lead2], approvals: { count: 1, verify: 'passkey' } });

let h: Harness;
let forwarder: Forwarder;
let publicUrl: string;

beforeAll(async () => {
  ({ h, forwarder, publicUrl } = await startVerifyPage({ policyYaml }));
}, 120_000);

afterAll(async () => {
  await h?.close();
  await forwarder?.close();
});

// Each test starts with nobody holding a passkey.
beforeEach(async () => {
  const store = new PasskeyStore(h.redis, h.prefix, () => new Date());
  await Promise.all([USERS.lead, USERS.lead2].map((user) => store.reset(TEAM, user, 'test')));
});

const passkeysOf = (user: string) => h.redis.hkeys(`${h.prefix}:passkeys:${TEAM}:${user}`);

/** `cloudops passkeys reset <user>` as an administrator runs it, with `policy` as POLICY_FILE. */
async function resetCli(user: string, policy = policyYaml()) {
  const dir = await mkdtemp(join(tmpdir(), 'cloudops-passkeys-'));
  try {
    const policyFile = join(dir, 'policy.yml');
    await writeFile(policyFile, policy);
    const repo = fileURLToPath(new URL('../../', import.meta.url));
    return await runProcess(
      process.execPath,
      [join(repo, 'bin', 'cloudops.mjs'), 'passkeys', 'reset', user],
      {
        env: {
          PATH: process.env.PATH ?? '',
          HOME: process.env.HOME ?? '',
          POLICY_FILE: policyFile,
          REDIS_URL: testRedisUrl(),
          REDIS_PREFIX: h.prefix,
        },
      },
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A fresh registration page for `user` (App Home → Register a passkey → the DM's link). */
async function registrationPage(user: string): Promise<PageTab> {
  return PageTab.open(await passkeyRegistrationLink(h, user));
}

/** A request on VM `vmid` and the approval link the bot answered `approver` with. */
async function approvalPage(text: string, approver: string = USERS.lead) {
  const created = await submitRequest(h, text);
  const url = urlButtonOf((await approveEphemeral(h, created.id, approver)).blocks) ?? '';
  return { created, tab: await PageTab.open(url) };
}

async function registerFirst(user: string, passkey: SoftPasskey): Promise<void> {
  const outcome = await (await registrationPage(user)).register(passkey);
  expect(outcome).toMatchObject({ status: 200, body: { title: 'Passkey registered' } });
}

describe('passkeys and their resets under attack', () => {
  it('a software authenticator registers a first passkey and verifies an approval with it', async () => {
    const lead2 = new SoftPasskey(publicUrl);
    await registerFirst(USERS.lead2, lead2);
    const { created, tab } = await approvalPage('resize shop-prod 101 cores=3', USERS.lead2);
    expect((await tab.approve(lead2)).body.title).toBe('Approved');
    await h.waitForRequest(created.id, (r) => r.state !== 'pending');
  });

  it('a registration without user verification is refused: nothing stored', async () => {
    const tab = await registrationPage(USERS.lead2);
    const outcome = await tab.register(new SoftPasskey(publicUrl), { noUserVerification: true });
    expect(outcome).toMatchObject({ status: 403, body: { title: 'The passkey did not verify' } });
    expect(await passkeysOf(USERS.lead2)).toEqual([]);
  });

  it('a proof kept open across a reset registers nothing, and the removed passkey approves nothing', async () => {
    // The attacker, with the lead's Slack session, registers first (trusted on first use), then proves that passkey
    // on a second registration page and keeps it open.
    const attacker = new SoftPasskey(publicUrl);
    await registerFirst(USERS.lead, attacker);
    const open = await registrationPage(USERS.lead);
    expect(await open.prove(attacker)).toMatchObject({ status: 200 });
    // The lead notices the DM; an administrator resets; the lead registers their own.
    const reset = await resetCli(USERS.lead);
    expect(reset.stdout).toContain(`Removed 1 passkey of ${USERS.lead}`);
    const owner = new SoftPasskey(publicUrl);
    await registerFirst(USERS.lead, owner);
    // The attacker's page, proven before the reset, adds nothing: neither a new passkey nor one over the lead's id.
    const fresh = await open.register(new SoftPasskey(publicUrl));
    expect(fresh).toMatchObject({ status: 410, body: { title: 'This link was ended' } });
    const over = await open.register(new SoftPasskey(publicUrl, owner.id));
    expect(over.status).toBe(410);
    expect(await passkeysOf(USERS.lead)).toEqual([owner.id]);
    // The removed passkey approves nothing; the lead's own does.
    const { created, tab } = await approvalPage('resize shop-prod 101 cores=5');
    expect((await tab.approve(attacker)).body.title).toBe('Not your passkey');
    expect((await tab.approve(owner)).body.title).toBe('Approved');
    await h.waitForRequest(created.id, (r) => r.state !== 'pending');
  });

  it('a credential id someone holds cannot be registered again, by another person or over their own', async () => {
    const owner = new SoftPasskey(publicUrl);
    await registerFirst(USERS.lead2, owner);
    // The lead registers a key of their own under lead2's credential id (as their first).
    const taken = await (await registrationPage(USERS.lead)).register(new SoftPasskey(publicUrl, owner.id));
    expect(taken).toMatchObject({ status: 409, body: { title: 'Passkey already registered' } });
    expect(await passkeysOf(USERS.lead)).toEqual([]);
    // lead2 adding "another" passkey under the id of the one they have (after proving it): refused too.
    const again = await registrationPage(USERS.lead2);
    expect(await again.prove(owner)).toMatchObject({ status: 200 });
    expect((await again.register(new SoftPasskey(publicUrl, owner.id))).status).toBe(409);
    // lead2's passkey still approves.
    const { created, tab } = await approvalPage('resize shop-prod 102 cores=6', USERS.lead2);
    expect((await tab.approve(owner)).body.title).toBe('Approved');
    await h.waitForRequest(created.id, (r) => r.state !== 'pending');
  });

  it('a signature counter written after a reset does not bring the passkey back', async () => {
    const key = new SoftPasskey(publicUrl);
    await registerFirst(USERS.lead2, key);
    const store = new PasskeyStore(h.redis, h.prefix, () => new Date());
    // On one connection the reset's read goes first, then the counter update's, then the reset's removal: the
    // update must not write back the entry the reset removed.
    const [removed] = await Promise.all([
      store.reset(TEAM, USERS.lead2, 'test'),
      store.touch(TEAM, USERS.lead2, key.id, 99),
    ]);
    expect(removed).toBe(1);
    expect(await passkeysOf(USERS.lead2)).toEqual([]);
    const { tab } = await approvalPage('resize shop-prod 102 cores=7', USERS.lead2);
    expect((await tab.approve(key)).body.title).toBe('Not your passkey');
  });

  it('cloudops passkeys reset works on a policy without workspace:', async () => {
    const key = new SoftPasskey(publicUrl);
    await registerFirst(USERS.lead2, key);
    const policy = policyYaml().replace(/^workspace: .*$/m, '');
    expect(policy).not.toContain('workspace:');
    const reset = await resetCli(USERS.lead2, policy);
    expect({ code: reset.code, stderr: reset.stderr }).toEqual({ code: 0, stderr: '' });
    expect(reset.stdout).toContain(`Removed 1 passkey of ${USERS.lead2}`);
    expect(await passkeysOf(USERS.lead2)).toEqual([]);
    const { tab } = await approvalPage('resize shop-prod 102 cores=8', USERS.lead2);
    expect((await tab.approve(key)).body.title).toBe('Not your passkey');
  });

  it('a Slack rate limit on the "passkey registered" DM: the page says registered, the DM arrives later', async () => {
    const tab = await registrationPage(USERS.lead2);
    const seen = h.slack.messages(USERS.lead2).length;
    h.slack.failNext('chat.postMessage', { status: 429, retryAfter: 1 });
    const outcome = await tab.register(new SoftPasskey(publicUrl));
    expect(outcome).toMatchObject({ status: 200, body: { title: 'Passkey registered' } });
    const dm = await h.slack.waitFor(() =>
      h.slack
        .messages(USERS.lead2)
        .slice(seen)
        .find((m) => (m.text ?? '').startsWith('A passkey was registered for you')),
    );
    expect(dm).toBeDefined();
  });

  it('a page session planted before the owner proves their passkey proves nothing for whoever planted it', async () => {
    const owner = new SoftPasskey(publicUrl);
    await registerFirst(USERS.lead, owner);
    // The attacker opens the lead's registration link and makes the lead's browser carry that session's cookie.
    const url = await passkeyRegistrationLink(h, USERS.lead);
    const attacker = await PageTab.open(url);
    const victim = await PageTab.open(url, attacker.sessionCookie);
    expect(await victim.prove(owner)).toMatchObject({ status: 200, body: { proven: true } });
    expect(victim.sessionCookie).not.toBe(attacker.sessionCookie);
    // The planted session was not the one proved: it registers nothing; the owner's renewed one does.
    expect((await attacker.register(new SoftPasskey(publicUrl))).status).toBe(403);
    expect(await passkeysOf(USERS.lead)).toEqual([owner.id]);
    const added = await victim.register(new SoftPasskey(publicUrl));
    expect(added).toMatchObject({ status: 200, body: { title: 'Passkey registered' } });
  });

  it('a flood of opens of one link is refused past the cap; the page opened again in its browser still works', async () => {
    const key = new SoftPasskey(publicUrl);
    await registerFirst(USERS.lead2, key);
    const { created, tab } = await approvalPage('resize shop-prod 101 cores=6', USERS.lead2);
    const opens = await Promise.all(Array.from({ length: 25 }, () => PageTab.open(tab.url)));
    expect(opens.filter((o) => o.status === 200)).toHaveLength(SESSIONS_PER_LINK - 1);
    expect(opens.filter((o) => o.status === 429)).toHaveLength(25 - (SESSIONS_PER_LINK - 1));
    expect(opens.find((o) => o.status === 429)?.html).toContain('Opened too often');
    // The approver's own page, opened again with its cookie, keeps its session and verifies.
    expect((await PageTab.open(tab.url, tab.sessionCookie)).status).toBe(200);
    expect((await tab.approve(key)).body.title).toBe('Approved');
    await h.waitForRequest(created.id, (r) => r.state !== 'pending');
  });

  it('registration links are capped per person: past the cap the person is told, and no link is stored', async () => {
    for (let i = 0; i < OPEN_REGISTRATION_LINKS; i++)
      expect(await passkeyRegistrationLink(h, USERS.lead2)).toContain('/passkeys/');
    const seen = h.slack.messages(USERS.lead2).length;
    await clickOnHome(h, 'passkey_register', '', USERS.lead2);
    const dm = await h.slack.waitFor(() =>
      h.slack
        .messages(USERS.lead2)
        .slice(seen)
        .find((m) => m.text?.includes('several registration links open already')),
    );
    expect(urlButtonOf(dm.blocks)).toBeUndefined();
    expect(
      h.slack
        .messages(USERS.lead2)
        .slice(seen)
        .filter((m) => urlButtonOf(m.blocks)),
    ).toEqual([]);
    // A reset ends them (and frees the person to ask again).
    await resetCli(USERS.lead2);
    expect(await passkeyRegistrationLink(h, USERS.lead2)).toContain('/passkeys/');
  });

  it('a registration link used up gives its place back: after registering, the person may again hold the cap of open links', async () => {
    await registerFirst(USERS.lead2, new SoftPasskey(publicUrl));
    // The used link no longer counts: the full cap of fresh links is sent.
    for (let i = 0; i < OPEN_REGISTRATION_LINKS; i++)
      expect(await passkeyRegistrationLink(h, USERS.lead2)).toContain('/passkeys/');
  });

  it('a request whose headers never finish is answered 408 and closed, well before Node’s default minute', async () => {
    const socket = connect(h.bot.port ?? 0, '127.0.0.1');
    const ended = new Promise<string>((resolve) => {
      let answer = '';
      socket.on('data', (chunk: Buffer) => {
        answer += chunk.toString();
      });
      socket.on('close', () => resolve(answer));
      socket.on('error', () => resolve(answer));
    });
    socket.write('GET /verify/AAAA HTTP/1.1\r\nHost: localhost\r\nX-Slow: ');
    const timer = setTimeout(() => socket.destroy(), 40_000);
    const answer = await ended;
    clearTimeout(timer);
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
  }, 60_000);

  it('a passkey, a link and a page session written straight into Redis grant nothing, each audited seal_invalid', async () => {
    const owner = new SoftPasskey(publicUrl);
    await registerFirst(USERS.lead2, owner);
    const hash = `${h.prefix}:passkeys:${TEAM}:${USERS.lead2}`;
    const ownEntry = JSON.parse((await h.redis.hget(hash, owner.id)) ?? '{}') as { seal?: string };
    expect(ownEntry.seal).toMatch(/^[0-9a-f]{12}\./);
    const sealInvalid = async () =>
      (await auditRecords(h.redis, h.prefix)).filter((r) => r.act === 'seal_invalid').length;
    const before = await sealInvalid();
    // A Redis writer plants a passkey of their own under lead2, shaped as the bot stores one; another carries the
    // seal of lead2's real passkey.
    const planted = new SoftPasskey(publicUrl);
    const copied = new SoftPasskey(publicUrl);
    const entry = (key: SoftPasskey, seal?: string) =>
      JSON.stringify({
        publicKey: key.cosePublicKey().toString('base64url'),
        counter: 0,
        createdAt: new Date().toISOString(),
        ...(seal ? { seal } : {}),
      });
    await h.redis.hset(hash, planted.id, entry(planted), copied.id, entry(copied, ownEntry.seal));
    const { created, tab } = await approvalPage('resize shop-prod 101 cores=8', USERS.lead2);
    expect((await tab.approve(planted)).body.title).toBe('Not your passkey');
    expect((await tab.approve(copied)).body.title).toBe('Not your passkey');
    // The lead's own passkey, sealed by the bot for the lead, moved verbatim under lead2: the seal names its person.
    const leads = new SoftPasskey(publicUrl);
    await registerFirst(USERS.lead, leads);
    const moved = (await h.redis.hget(`${h.prefix}:passkeys:${TEAM}:${USERS.lead}`, leads.id)) ?? '';
    await h.redis.hset(hash, leads.id, moved);
    expect((await tab.approve(leads)).body.title).toBe('Not your passkey');
    // A page session planted on lead2's registration link, "proved" with lead2's own passkey.
    const url = await passkeyRegistrationLink(h, USERS.lead2);
    const sha = (text: string) => createHash('sha256').update(text).digest('hex');
    const sessionId = randomBytes(32).toString('base64url');
    const csrf = randomBytes(32).toString('base64url');
    const token = url.slice(url.lastIndexOf('/') + 1);
    await h.redis.hset(`${h.prefix}:verify:session:${sha(sessionId)}`, {
      link: sha(token),
      csrf,
      proven: owner.id,
    });
    const options = await http(`${url}/register-options`, {
      method: 'POST',
      headers: {
        cookie: `cloudops_page=${sessionId}`,
        'x-csrf-token': csrf,
        origin: publicUrl,
        'content-type': 'application/json',
      },
      body: '{}',
    });
    expect(options.statusCode).toBe(403);
    expect(((await options.body.json()) as { title: string }).title).toBe('Open the link again');
    // A link written into Redis: not one the bot issued.
    const forged = randomBytes(32).toString('base64url');
    await h.redis.hset(`${h.prefix}:verify:link:${sha(forged)}`, {
      purpose: JSON.stringify({ kind: 'register', teamId: TEAM, user: USERS.lead2 }),
      expiresAt: String(Date.now() + 600_000),
      used: '0',
    });
    const page = await PageTab.open(`${publicUrl}/passkeys/${forged}`);
    expect(page.status).toBe(404);
    expect(await sealInvalid()).toBeGreaterThanOrEqual(before + 5);
    // lead2's own passkey still approves.
    expect((await tab.approve(owner)).body.title).toBe('Approved');
    await h.waitForRequest(created.id, (r) => r.state !== 'pending');
  });

  it('two first registrations racing on two links: one stands, the other registers nothing', async () => {
    const tabs = [await registrationPage(USERS.lead), await registrationPage(USERS.lead)];
    const keys = [new SoftPasskey(publicUrl), new SoftPasskey(publicUrl)];
    // Both pages fetch their options while the lead has none (each may register a first passkey)…
    const options = await Promise.all(tabs.map((tab) => tab.post('register-options')));
    expect(options.map((o) => o.status)).toEqual([200, 200]);
    // …and answer at once: only one is trusted on first use.
    const outcomes = await Promise.all(
      tabs.map((tab, i) =>
        tab.post('register', {
          response: keys[i]?.registration({ challenge: options[i]?.body.challenge ?? '' }),
        }),
      ),
    );
    expect(outcomes.map((o) => o.status).sort()).toEqual([200, 409]);
    expect(outcomes.find((o) => o.status === 409)?.body.title).toBe('Verify again');
    expect(await passkeysOf(USERS.lead)).toHaveLength(1);
  });

  it('a reset between a page’s options and its answer: nothing registers; a proof replayed registers nothing', async () => {
    const owner = new SoftPasskey(publicUrl);
    await registerFirst(USERS.lead, owner);
    // A proof answered, then the same answer replayed on another page of the lead's: its challenge is not that page's.
    const first = await registrationPage(USERS.lead);
    const challenge = (await first.post('proof-options')).body.challenge ?? '';
    const proof = owner.assertion(challenge);
    expect((await first.post('proof', { response: proof })).status).toBe(200);
    expect((await first.post('proof', { response: proof })).status).toBe(403);
    const second = await registrationPage(USERS.lead);
    await second.post('proof-options');
    expect((await second.post('proof', { response: proof })).body.title).toBe('The passkey did not verify');
    expect((await second.post('register-options')).body.title).toBe('Verify with your passkey first');
    // The first page, proved, gets its options; a reset lands before its answer.
    const options = await first.post('register-options');
    expect(options.status).toBe(200);
    await resetCli(USERS.lead);
    const late = await first.post('register', {
      response: new SoftPasskey(publicUrl).registration({ challenge: options.body.challenge ?? '' }),
    });
    expect(late).toMatchObject({ status: 410, body: { title: 'This link was ended' } });
    expect(await passkeysOf(USERS.lead)).toEqual([]);
  });

  it('the page refuses a link whose request stays pending at a new revision', async () => {
    const key = new SoftPasskey(publicUrl);
    await registerFirst(USERS.lead2, key);
    const { created, tab } = await approvalPage('resize shop-prod 101 cores=9', USERS.lead2);
    const options = await tab.post('passkey-options');
    expect(options.status).toBe(200);
    // What it would do changes while it stays pending (a new revision).
    const params = created.params.kind === 'resize' ? created.params : undefined;
    if (!params) throw new Error('a resize was expected');
    const changed = await h.store.update(created.id, {
      params: { ...params, target: { ...params.target, cores: 8 } },
    });
    expect(changed).toMatchObject({ state: 'pending', revision: (created.revision ?? 1) + 1 });
    const reopened = await PageTab.open(tab.url);
    expect(reopened.status).toBe(409);
    expect(reopened.html).toContain('The request changed');
    const answer = await tab.post('passkey', { response: key.assertion(options.body.challenge ?? '') });
    expect(answer).toMatchObject({ status: 409, body: { title: 'The request changed' } });
    expect((await h.store.get(created.id))?.approvals ?? []).toEqual([]);
    expect(h.slack.messages(CHANNELS.prod).length).toBeGreaterThan(0);
  });
});
