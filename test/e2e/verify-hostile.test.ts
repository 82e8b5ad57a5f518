import { connect } from 'node:net';
import { Agent, request as http } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANNELS, type Harness, USERS } from '../helpers/harness.ts';
import { LoginBrowser } from '../helpers/oidc-login.ts';
import type { TestOidcProvider } from '../helpers/oidc-provider.ts';
import {
  approveEphemeral,
  passkeyRegistrationLink,
  startVerifyPage,
  submitRequest,
  urlButtonOf,
  verifiedPolicyYaml,
} from '../helpers/verified-approvals.ts';
import type { Forwarder } from '../helpers/verify-browser.ts';

// The verification page attacked as a hostile user would, over real HTTP (undici) against the whole bot with OIDC
// configured and a real OpenID Provider. Each test is named after the attack. The Slack stand-in answers
// <user id, lower-cased>@example.com as a user's email.

/** An approver whose Slack email has a "k", which the Kelvin sign (U+212A) lower-cases to. */
const KATE = 'U0KATE';

const policyYaml = () =>
  verifiedPolicyYaml({
    approvers: [USERS.lead, KATE],
    approvals: { count: 1, verify: ['passkey', 'sso'] },
    moreVms: [
      `{ vmid: 104, name: "<img src=x onerror=alert(1)>'\\"", cores: 2, ram_gb: 2, os_disk_gb: 20, cpu_class: light, wan_mode: dual, private_network: 'on' }`,
    ],
    staging: { name: 'shop-staging' },
  });

let h: Harness;
let op: TestOidcProvider;
let forwarder: Forwarder;
let publicUrl: string;
/** Every secret the tests saw (link tokens, CSRF tokens, cookie ids, codes): none may reach the logs. */
const secrets = new Set<string>();

beforeAll(async () => {
  ({ h, op, forwarder, publicUrl } = await startVerifyPage({
    policyYaml,
    logLevel: 'debug',
    oidc: [
      {
        login: 'lead',
        password: 'lead-pw',
        sub: 'sub-lead',
        email: 'u0lead@example.com',
        emailVerified: true,
      },
      // The approver's email with its "k" written as the Kelvin sign: another address, another person.
      {
        login: 'kelvin',
        password: 'k-pw',
        sub: 'sub-kelvin',
        email: 'u0\u212Aate@example.com',
        emailVerified: true,
      },
    ],
  }));
  secrets.add(op.clientSecret);
}, 120_000);

afterAll(async () => {
  await h?.close();
  await op?.close();
  await forwarder?.close();
});

const request = (text: string, channel?: string) => submitRequest(h, text, channel);

/** Clicks Approve as `user` and returns the link the bot answered with. */
async function linkFor(id: string, user: string, channel: string = CHANNELS.prod): Promise<string> {
  const ephemeral = await approveEphemeral(h, id, user, channel);
  const url = urlButtonOf(ephemeral.blocks) ?? '';
  expect(url).toMatch(/\/verify\/[A-Za-z0-9_-]{43}$/);
  secrets.add(url.slice(url.lastIndexOf('/') + 1));
  return url;
}

/** GETs the page as a browser would: its session cookie and CSRF token. */
async function openPage(url: string) {
  const answer = await http(url);
  const html = await answer.body.text();
  const setCookie = String(answer.headers['set-cookie'] ?? '');
  const cookie = setCookie.split(';')[0] ?? '';
  const csrf = /(?:data-csrf|name="csrf" value)="([^"]+)"/.exec(html)?.[1] ?? '';
  secrets.add(cookie.split('=')[1] ?? '');
  secrets.add(csrf);
  return { status: answer.statusCode, headers: answer.headers, html, cookie, csrf, setCookie };
}

/** Starts the SSO login from the page's form: the bot's answer (a 303 to the provider when it starts). */
async function startSso(url: string, page: { cookie: string; csrf: string }) {
  const answer = await http(`${url}/sso`, {
    method: 'POST',
    headers: {
      cookie: page.cookie,
      origin: publicUrl,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams({ csrf: page.csrf }).toString(),
  });
  const body = await answer.body.text();
  const ssoCookie = String(answer.headers['set-cookie'] ?? '').split(';')[0] ?? '';
  secrets.add(ssoCookie.split('=')[1] ?? '');
  return { status: answer.statusCode, headers: answer.headers, body, ssoCookie };
}

/** A whole SSO login over HTTP: page, form, provider, callback; the callback's answer. */
async function ssoLogin(
  url: string,
  credentials: { login: string; password: string },
  page?: { cookie: string; csrf: string },
) {
  const started = await startSso(url, page ?? (await openPage(url)));
  expect(started.status).toBe(303);
  const callback = await new LoginBrowser().login(
    String(started.headers.location),
    `${publicUrl}/auth/callback`,
    credentials,
  );
  secrets.add(callback.searchParams.get('code') ?? '');
  const answer = await http(callback, { headers: { cookie: started.ssoCookie } });
  const html = await answer.body.text();
  return { status: answer.statusCode, headers: answer.headers, html, callback, ssoCookie: started.ssoCookie };
}

/** A connection the server cut (it may answer and close before a big body is sent) as a value. */
const asError = (error: unknown) => (error instanceof Error ? error : new Error(String(error)));

const title = (html: string) => /<h1>([^<]*)<\/h1>/.exec(html)?.[1] ?? '';

describe('the verification page under attack', () => {
  it('SSO started on a passkey-only link: refused before the provider, the link left working', async () => {
    const created = await request('resize shop-staging 201 cores=2', CHANNELS.staging);
    const url = await linkFor(created.id, USERS.lead, CHANNELS.staging);
    const page = await openPage(url);
    expect(page.html).not.toContain('id="sso"');
    const started = await startSso(url, page);
    expect(started.headers.location).toBeUndefined();
    expect(started.status).toBe(403);
    expect(title(started.body)).toBe('Not for this link');
    expect(op.asked.length).toBe(0);
    // Nothing used up: the page still opens for its approver.
    expect((await openPage(url)).status).toBe(200);
  });

  it('an SSO login whose email is a Unicode lookalike of the approver’s (Kelvin sign) is another person', async () => {
    const created = await request('resize shop-prod 101 cores=3');
    const url = await linkFor(created.id, KATE);
    const outcome = await ssoLogin(url, { login: 'kelvin', password: 'k-pw' });
    expect(title(outcome.html)).toBe('The login was another person');
    expect(await h.store.get(created.id)).toMatchObject({ state: 'pending', approvals: [] });
  });

  it('every answer carries the CSP, the redirects to and from the provider included', async () => {
    const created = await request('resize shop-prod 102 cores=5');
    const url = await linkFor(created.id, USERS.lead);
    const page = await openPage(url);
    const started = await startSso(url, page);
    expect(started.status).toBe(303);
    expect(started.headers['content-security-policy']).toContain("default-src 'none'");
    expect(started.headers['x-content-type-options']).toBe('nosniff');
    const unknown = await http(`${publicUrl}/verify/${'A'.repeat(43)}`);
    await unknown.body.dump();
    expect(unknown.statusCode).toBe(404);
    expect(unknown.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    const noAction = await http(`${url}/nothing-here`, { method: 'POST' });
    await noAction.body.dump();
    expect(noAction.statusCode).toBe(404);
    expect(noAction.headers['content-security-policy']).toContain("default-src 'none'");
    const noAsset = await http(`${publicUrl}/verify-assets/nothing.js`);
    await noAsset.body.dump();
    expect(noAsset.statusCode).toBe(404);
    expect(noAsset.headers['content-security-policy']).toContain("default-src 'none'");
    const asset = await http(`${publicUrl}/verify-assets/page.js`);
    await asset.body.dump();
    expect(asset.headers['content-security-policy']).toContain("default-src 'none'");
  });

  it('replaying the callback URL after the login counted counts nothing again', async () => {
    const created = await request('resize shop-prod 102 cores=6');
    const url = await linkFor(created.id, USERS.lead);
    const outcome = await ssoLogin(url, { login: 'lead', password: 'lead-pw' });
    expect(title(outcome.html)).toBe('Approved');
    const replay = await http(outcome.callback, { headers: { cookie: outcome.ssoCookie } });
    expect(title(await replay.body.text())).toBe('Open the link again');
    expect(replay.statusCode).toBe(403);
    const done = await h.store.get(created.id);
    expect(done?.approvals).toHaveLength(1);
  });

  it('a callback without the pending cookie counts nothing', async () => {
    const answer = await http(`${publicUrl}/auth/callback?code=forged&state=forged`);
    expect(title(await answer.body.text())).toBe('Open the link again');
    expect(answer.statusCode).toBe(403);
    expect(answer.headers['content-security-policy']).toContain("default-src 'none'");
  });

  it('cookies: HttpOnly, SameSite=Strict on the page, Lax only on /auth/callback; each scoped to its path', async () => {
    const created = await request('resize shop-prod 101 cores=4');
    const url = await linkFor(created.id, USERS.lead);
    const page = await openPage(url);
    const path = new URL(url).pathname;
    expect(page.setCookie).toContain(`Path=${path}`);
    expect(page.setCookie).toContain('HttpOnly');
    expect(page.setCookie).toContain('SameSite=Strict');
    const started = await startSso(url, page);
    const sso = String(started.headers['set-cookie']);
    expect(sso).toContain('Path=/auth/callback');
    expect(sso).toContain('HttpOnly');
    expect(sso).toContain('SameSite=Lax');
  });

  it('cross-site POSTs: another Origin with a stolen token, no token, another link’s token, no cookie', async () => {
    const created = await request('resize shop-prod 101 cores=5');
    const url = await linkFor(created.id, USERS.lead);
    const other = await request('resize shop-prod 102 cores=7');
    const otherUrl = await linkFor(other.id, USERS.lead);
    const page = await openPage(url);
    const otherPage = await openPage(otherUrl);
    const post = (headers: Record<string, string>) =>
      http(`${url}/passkey-options`, { method: 'POST', headers, body: '{}' });
    const attempts: Record<string, string>[] = [
      { cookie: page.cookie, 'x-csrf-token': page.csrf, origin: 'https://evil.example' },
      { cookie: page.cookie, origin: publicUrl },
      { cookie: page.cookie, 'x-csrf-token': otherPage.csrf, origin: publicUrl },
      { cookie: otherPage.cookie, 'x-csrf-token': otherPage.csrf, origin: publicUrl },
      { 'x-csrf-token': page.csrf, origin: publicUrl },
    ];
    for (const headers of attempts) {
      const answer = await post(headers);
      expect(answer.statusCode).toBe(403);
      expect(((await answer.body.json()) as { title: string }).title).toBe('Open the link again');
    }
    // The page's own session still works: the attempts used nothing up.
    const own = await post({ cookie: page.cookie, 'x-csrf-token': page.csrf, origin: publicUrl });
    expect(own.statusCode).toBe(200);
    expect(((await own.body.json()) as { challenge: string }).challenge).toBeTruthy();
    expect((await h.store.get(created.id))?.approvals).toEqual([]);
  });

  it('guessed and malformed link tokens: the same 404, nothing stored for them', async () => {
    const guesses = ['A'.repeat(43), 'short', `${'B'.repeat(43)}%00`, '..%2F..%2Fetc', 'A'.repeat(5000)];
    for (const guess of guesses) {
      const answer = await http(`${publicUrl}/verify/${guess}`);
      const html = await answer.body.text();
      expect([404, 414, 431]).toContain(answer.statusCode);
      if (answer.statusCode === 404 && html.includes('<h1>')) expect(title(html)).toBe('Unknown link');
      expect(answer.headers['set-cookie']).toBeUndefined();
    }
  });

  it('a body over 64 KiB and huge headers are refused without counting', async () => {
    const created = await request('resize shop-prod 101 cores=6');
    const url = await linkFor(created.id, USERS.lead);
    const page = await openPage(url);
    const headers = { cookie: page.cookie, 'x-csrf-token': page.csrf, origin: publicUrl };
    await (await http(`${url}/passkey-options`, { method: 'POST', headers, body: '{}' })).body.dump();
    // Their own connections: the bot answers before reading the rest and closes, which would break a pooled one.
    const own = new Agent();
    const big = await http(`${url}/passkey`, {
      method: 'POST',
      headers,
      dispatcher: own,
      body: JSON.stringify({ response: { id: 'x'.repeat(200_000) } }),
    }).catch(asError);
    if (!(big instanceof Error)) {
      expect(big.statusCode).toBe(403);
      await big.body.dump();
    }
    const huge = await http(url, {
      headers: { cookie: `x=${'y'.repeat(70_000)}` },
      dispatcher: own,
    }).catch(asError);
    if (!(huge instanceof Error)) {
      expect(huge.statusCode).toBe(431);
      await huge.body.dump();
    }
    await own.close();
    expect((await h.store.get(created.id))?.approvals).toEqual([]);
  });

  it('two pending SSO logins: the answer of one with the other’s cookie counts nothing', async () => {
    const created = await request('resize shop-prod 102 cores=8');
    const url = await linkFor(created.id, USERS.lead);
    const first = await startSso(url, await openPage(url));
    const second = await startSso(url, await openPage(url));
    const callback = await new LoginBrowser().login(
      String(second.headers.location),
      `${publicUrl}/auth/callback`,
      { login: 'lead', password: 'lead-pw' },
    );
    secrets.add(callback.searchParams.get('code') ?? '');
    const swapped = await http(callback, { headers: { cookie: first.ssoCookie } });
    expect(title(await swapped.body.text())).toBe('The SSO login did not finish');
    expect((await h.store.get(created.id))?.approvals).toEqual([]);
    // The login's own cookie still finishes it: the swap used nothing of it up.
    const own = await http(callback, { headers: { cookie: second.ssoCookie } });
    expect(title(await own.body.text())).toBe('Approved');
  });

  it('registering a passkey where OIDC is configured, without the SSO login, or with another person’s', async () => {
    const url = await passkeyRegistrationLink(h, USERS.lead);
    expect(url).toMatch(/\/passkeys\/[A-Za-z0-9_-]{43}$/);
    secrets.add(url.slice(url.lastIndexOf('/') + 1));
    // A registration link's token on the approval page is an unknown link (and the other way round).
    const crossed = await http(url.replace('/passkeys/', '/verify/'));
    expect(crossed.statusCode).toBe(404);
    expect(title(await crossed.body.text())).toBe('Unknown link');
    const page = await openPage(url);
    expect(page.html).not.toContain('id="register"');
    const options = await http(`${url}/register-options`, {
      method: 'POST',
      headers: { cookie: page.cookie, 'x-csrf-token': page.csrf, origin: publicUrl },
      body: '{}',
    });
    expect(options.statusCode).toBe(403);
    expect(((await options.body.json()) as { title: string }).title).toBe('Log in with SSO first');
    // Kate's login on the lead's registration link: another person, the page still asks for SSO.
    const other = await ssoLogin(url, { login: 'kelvin', password: 'k-pw' }, page);
    expect(title(other.html)).toBe('The login was another person');
    expect((await openPage(url)).html).not.toContain('id="register"');
  });

  it('a link and a pending SSO login issued before a bot restart still work after it', async () => {
    const created = await request('resize shop-prod 101 cores=7');
    const url = await linkFor(created.id, USERS.lead);
    const page = await openPage(url);
    const started = await startSso(url, page);
    await h.restart();
    forwarder.target(h.bot.port ?? 0);
    expect((await openPage(url)).status).toBe(200);
    const callback = await new LoginBrowser().login(
      String(started.headers.location),
      `${publicUrl}/auth/callback`,
      { login: 'lead', password: 'lead-pw' },
    );
    secrets.add(callback.searchParams.get('code') ?? '');
    const done = await http(callback, { headers: { cookie: started.ssoCookie } });
    expect(title(await done.body.text())).toBe('Approved');
  });

  it('markup in a request’s fields (a VM name) is shown as text on the page, never as HTML', async () => {
    const created = await request('resize shop-prod 104 cores=3');
    const url = await linkFor(created.id, USERS.lead);
    const crossed = await http(url.replace('/verify/', '/passkeys/'));
    expect(crossed.statusCode).toBe(404);
    await crossed.body.dump();
    const page = await openPage(url);
    expect(page.status).toBe(200);
    expect(page.html).toContain('&lt;img src=x onerror=alert(1)&gt;&#39;&quot;');
    expect(page.html).not.toContain('<img');
  });

  it('a POST whose body never ends, from a stranger without a page session: answered at once', async () => {
    const created = await request('resize shop-prod 102 cores=9');
    const url = await linkFor(created.id, USERS.lead);
    for (const path of [
      `${new URL(url).pathname}/sso`,
      `/verify/${'A'.repeat(43)}/sso`,
      `${new URL(url).pathname}/passkey`,
    ]) {
      const socket = connect(forwarder.port, '127.0.0.1');
      const answer = new Promise<string>((resolve, reject) => {
        socket.once('data', (data) => resolve(data.toString('latin1')));
        socket.once('error', reject);
        socket.once('close', () => resolve(''));
      });
      socket.write(
        `POST ${path} HTTP/1.1\r\nHost: localhost:${forwarder.port}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 10000\r\n\r\ncsrf=`,
      );
      expect((await answer).split('\r\n')[0]).toBe('HTTP/1.1 403 Forbidden');
      socket.destroy();
    }
  });

  it('no link token, CSRF token, cookie id, authorization code or client secret reaches the logs (debug)', () => {
    secrets.delete('');
    expect(secrets.size).toBeGreaterThan(10);
    const logs = h.logs.join('\n');
    expect(logs.length).toBeGreaterThan(0);
    for (const secret of secrets)
      expect(logs.includes(secret), `a secret of ${secret.length} chars`).toBe(false);
  });
});
