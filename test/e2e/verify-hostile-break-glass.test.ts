import { request as http } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { linkKey } from '../../src/verify/links.ts';
import {
  BREAKER,
  breakGlassLink,
  FREEZE_START,
  FREEZE_WINDOW,
  frozenVerified,
  OTHER_BREAKER,
  registerSoftPasskeys,
} from '../helpers/break-glass.ts';
import { CHANNELS, type Harness, STAGING_UUID, USERS } from '../helpers/harness.ts';
import { PageTab, type SoftPasskey } from '../helpers/soft-passkey.ts';
import {
  approveEphemeral,
  startVerifyPage,
  submitRequest,
  urlButtonOf,
  verifiedPolicyYaml,
} from '../helpers/verified-approvals.ts';
import type { Forwarder } from '../helpers/verify-browser.ts';

// A verified break glass (docs/approvals.md#break-glass-under-a-verify-rule) attacked as a hostile user would, over
// real HTTP against the whole bot and its real link store: a software authenticator (test/helpers/soft-passkey.ts)
// holds each person's passkey. Another person's passkey on the breaker's link, a link used twice, a reason full of
// markup, a request unfrozen meanwhile, and a policy reload that removes the breaker between form and page.

/** shop-frozen (VM 201, staging channel): one approval verified by a passkey, frozen for two days. */
const policy = (breakers: string[]) =>
  verifiedPolicyYaml({
    approvals: { count: 1, verify: 'passkey' },
    staging: { name: 'shop-frozen', freeze: FREEZE_WINDOW },
    more: `break_glass: [${breakers.join(', ')}]\n`,
  });

let h: Harness;
let forwarder: Forwarder;
let publicUrl: string;
let keys: Record<string, SoftPasskey> = {};

beforeAll(async () => {
  ({ h, forwarder, publicUrl } = await startVerifyPage({
    now: FREEZE_START,
    policyFile: true,
    policyYaml: () => policy([BREAKER, OTHER_BREAKER]),
  }));
  keys = await registerSoftPasskeys(h, publicUrl, [USERS.lead, BREAKER, OTHER_BREAKER]);
}, 120_000);

afterAll(async () => {
  await h?.close();
  await forwarder?.close();
});

const keyOf = (user: string) => keys[user] as SoftPasskey;

/** The POSTs the cloud sim received for the request resizing VM 201 to `cores` (each test's requests differ in it). */
const postsFor = (cores: number) =>
  h.sim.applied.filter(
    (a) => a.projectUuid === STAGING_UUID && (a.body as { cores?: number }).cores === cores,
  ).length;

const frozen = (cores: number) => frozenVerified(h, cores, keyOf(USERS.lead));
const breakGlassUrl = (request: CloudRequest, reason: string) =>
  breakGlassLink(h, publicUrl, request, reason);

describe('a verified break glass under attack', () => {
  it("another person's passkey on the breaker's link runs nothing; the breaker's runs it once; the link works once", async () => {
    const request = await frozen(2);
    const url = await breakGlassUrl(request, '<b>now</b> & <!channel> \u202Eevil');
    const tab = await PageTab.open(url);
    expect(tab.status).toBe(200);
    expect(tab.html).toContain('<title>Verify your break glass · cloudops</title>');
    expect(tab.html).toContain(`Your break glass of request <strong>${request.id}</strong>`);
    // The reason is the breaker's, cleaned (no RTL override) and escaped: it shows as typed and does nothing.
    expect(tab.html).toContain('&lt;b&gt;now&lt;/b&gt; &amp; &lt;!channel&gt; evil');
    expect(tab.html).not.toContain('<b>now');
    expect(tab.html).not.toContain('\u202E');

    const foreign = await tab.approve(keyOf(OTHER_BREAKER));
    expect(foreign.body.title).toBe('Not your passkey');
    expect((await h.store.get(request.id))?.state).toBe('frozen');

    const done = await tab.approve(keyOf(BREAKER));
    expect(done.body).toMatchObject({ title: 'Running now', tone: 'ok' });
    const ran = await h.waitForRequest(request.id, (r) => r.state === 'succeeded', 20_000);
    expect(ran.breakGlass?.verified).toEqual({ method: 'passkey', subject: keyOf(BREAKER).id });
    expect(postsFor(2)).toBe(1);
    expect((await h.auditOf(request.id)).join('\n')).toContain(
      `break glass (verified: passkey, credential ${keyOf(BREAKER).id}):`,
    );

    const again = await tab.approve(keyOf(BREAKER));
    expect(again.body.title).toBe('This link was used already');
    expect((await PageTab.open(url)).html).toContain('This link was used already');
    expect(postsFor(2)).toBe(1);
  });

  it('a link whose request was unfrozen meanwhile (cancelled) says the request changed and runs nothing', async () => {
    const request = await frozen(3);
    const url = await breakGlassUrl(request, 'cannot wait');
    const tab = await PageTab.open(url);
    await h.click('cancel', request.id, USERS.dev, CHANNELS.staging);
    await h.waitForRequest(request.id, (r) => r.state === 'cancelled');
    expect((await tab.approve(keyOf(BREAKER))).body.title).toBe('The request changed');
    expect((await PageTab.open(url)).html).toContain('The request changed');
    expect((await h.store.get(request.id))?.breakGlass).toBeUndefined();
    expect(postsFor(3)).toBe(0);
  });

  it('a breaker removed from break_glass by a reload between form and page is refused on the page', async () => {
    const request = await frozen(4);
    const url = await breakGlassUrl(request, 'before the reload');
    const tab = await PageTab.open(url);
    expect(await h.reloadPolicy(policy([OTHER_BREAKER]))).toBe('changed');
    try {
      const refused = await tab.approve(keyOf(BREAKER));
      expect(refused).toMatchObject({ status: 403, body: { title: 'Not allowed now' } });
      expect(refused.body.text).toContain('Nothing was run.');
    } finally {
      await h.reloadPolicy(policy([BREAKER, OTHER_BREAKER]));
    }
    const still = await h.store.get(request.id);
    expect(still?.state).toBe('frozen');
    expect(still?.breakGlass).toBeUndefined();
    expect(postsFor(4)).toBe(0);
  });

  it("a break-glass link's reason never reaches its URL or the logs, and a POST without the page's session runs nothing", async () => {
    const request = await frozen(5);
    const reason = 'secret-looking reason 7f3a9c';
    const url = await breakGlassUrl(request, reason);
    expect(url).not.toContain('7f3a9c');
    // The token is a random id: neither the request id nor the reason is in it, and the page reads it from Redis.
    const token = url.slice(url.lastIndexOf('/') + 1);
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect((await http(url)).statusCode).toBe(200);
    expect(h.logs.join('\n')).not.toContain(token);
    // A POST without the page's session and CSRF token does nothing.
    const forged = await http(`${url}/passkey`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: publicUrl },
      body: '{}',
    });
    expect(forged.statusCode).toBe(403);
    await forged.body.dump();
    expect((await h.store.get(request.id))?.state).toBe('frozen');
    expect(postsFor(5)).toBe(0);
  });

  it("a Redis writer who rewrites a link's claims (another breaker, another reason) or turns an approval link into a break glass gets an unknown link", async () => {
    const request = await frozen(6);
    const url = await breakGlassUrl(request, 'the real reason');
    const key = linkKey(h.prefix, url.slice(url.lastIndexOf('/') + 1));
    const purpose = JSON.parse((await h.redis.hget(key, 'purpose')) ?? '{}') as {
      kind: string;
      claims: Record<string, unknown>;
    };
    expect(purpose).toMatchObject({
      kind: 'break_glass',
      claims: { reason: 'the real reason', approver: BREAKER },
    });
    const rewritten = {
      ...purpose,
      claims: { ...purpose.claims, approver: OTHER_BREAKER, reason: 'planted' },
    };
    await h.redis.hset(key, 'purpose', JSON.stringify(rewritten));
    const tab = await PageTab.open(url);
    expect(tab.status).toBe(404);
    expect(tab.html).toContain('Unknown link');
    expect((await tab.approve(keyOf(OTHER_BREAKER))).body.title).not.toBe('Running now');

    // An approval link of a pending request, its purpose turned into a break glass of the frozen one.
    const pending = await submitRequest(h, 'resize shop-frozen 201 cores=7', CHANNELS.staging);
    const approval =
      urlButtonOf((await approveEphemeral(h, pending.id, USERS.lead, CHANNELS.staging)).blocks) ?? '';
    const approvalKey = linkKey(h.prefix, approval.slice(approval.lastIndexOf('/') + 1));
    const turned = { kind: 'break_glass', claims: { ...purpose.claims, approver: USERS.lead, reason: 'x' } };
    await h.redis.hset(approvalKey, 'purpose', JSON.stringify(turned));
    expect((await PageTab.open(approval)).status).toBe(404);
    const still = await h.store.get(request.id);
    expect(still?.state).toBe('frozen');
    expect(still?.breakGlass).toBeUndefined();
    expect(postsFor(6)).toBe(0);
  });
});
