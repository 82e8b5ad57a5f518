import { inspect } from 'node:util';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSlackStandIn } from '../../sim/slack/server.ts';
import { SlackApi } from '../../src/slack-api/client.ts';
import { standingOf } from '../../src/slack-api/users.ts';
import { createSsoFlow, type SsoEnv, type SsoError, type SsoFlowHandle } from '../../src/verify/sso.ts';
import type { SsoPending } from '../../src/verify/sso-flow.ts';
import { LoginBrowser } from '../helpers/oidc-login.ts';
import { startOidcProvider, type TestOidcProvider } from '../helpers/oidc-provider.ts';
import { type ForwardProxy, startForwardProxy } from '../helpers/proxies.ts';

// The SSO login against a real OpenID Provider (oidc-provider) over HTTP on loopback: the flow builds the
// authorization URL, a browser stand-in logs in at the provider's form, and the flow checks what comes back.
const PUBLIC_URL = 'http://127.0.0.1:3999';
const REDIRECT = `${PUBLIC_URL}/auth/callback`;
const ALICE = { login: 'alice', password: 'correct horse 8d1f' };
const ERIN = { login: 'erin', password: 'entra erin 52c1' };
const FRANK = { login: 'frank', password: 'entra frank 7a0e' };

let op: TestOidcProvider;
let proxy: ForwardProxy;
const flows: SsoFlowHandle[] = [];

function flow(overrides: Partial<SsoEnv> = {}): SsoFlowHandle {
  const made = createSsoFlow({
    PUBLIC_URL,
    OIDC_ISSUER: op.issuer,
    OIDC_CLIENT_ID: op.clientId,
    OIDC_CLIENT_SECRET: op.clientSecret,
    ...overrides,
  });
  flows.push(made);
  return made;
}

/** One whole login: begin, the browser at the provider, and the callback URL the browser came back with. */
async function loginWith(
  sso: SsoFlowHandle,
  browser = new LoginBrowser(),
): Promise<{ callback: URL; pending: SsoPending }> {
  const { url, pending } = await sso.begin();
  return { callback: await browser.login(url, REDIRECT, ALICE), pending };
}

/** The refusal of `promise`, checked to carry neither the code nor the client secret however it is printed. */
async function refusal(promise: Promise<unknown>, callback: URL): Promise<SsoError> {
  const error = (await promise.then(
    () => expect.unreachable('the login should have been refused'),
    (e: unknown) => e,
  )) as SsoError;
  expect(error.name).toBe('SsoError');
  const code = callback.searchParams.get('code') ?? '';
  expect(code.length).toBeGreaterThan(10);
  for (const printed of [error.message, inspect(error, { depth: 10 }), JSON.stringify(error)]) {
    expect(printed).not.toContain(code);
    expect(printed).not.toContain(op.clientSecret);
  }
  return error;
}

beforeAll(async () => {
  op = await startOidcProvider({
    redirectUri: REDIRECT,
    accounts: [
      { ...ALICE, sub: 'okta|00u1alice', email: 'alice@example.com', emailVerified: true },
      { ...ERIN, sub: 'entra-erin', email: 'erin@example.com', emailDomainOwnerVerified: true },
      { ...FRANK, sub: 'entra-frank', email: 'frank@example.com', emailDomainOwnerVerified: false },
    ],
  });
  proxy = await startForwardProxy();
});

afterAll(async () => {
  for (const made of flows) await made.close();
  await op?.close();
  await proxy?.close();
});

describe('the SSO login of verified approvals, against a real OpenID Provider', () => {
  it('a full login returns who logged in, asked with PKCE S256, prompt=login and max_age=0', async () => {
    const sso = flow();
    const { url, pending } = await sso.begin();
    const asked = new URL(url).searchParams;
    expect(Object.fromEntries(asked)).toMatchObject({
      response_type: 'code',
      scope: 'openid email',
      redirect_uri: REDIRECT,
      prompt: 'login',
      max_age: '0',
      code_challenge_method: 'S256',
      state: pending.state,
      nonce: pending.nonce,
    });
    expect(asked.has('acr_values')).toBe(false);
    const callback = await new LoginBrowser().login(url, REDIRECT, ALICE);
    expect(await sso.finish(callback, pending)).toEqual({
      subject: 'okta|00u1alice',
      email: 'alice@example.com',
      emailVerified: true,
    });
  });

  it('a browser logs in at the provider too (Chromium)', async () => {
    const sso = flow();
    const { url, pending } = await sso.begin();
    const browser = await chromium.launch({ executablePath: '/usr/bin/chromium' });
    try {
      const page = await browser.newPage();
      // Nothing listens on PUBLIC_URL here: the browser's arrival there is the provider's answer.
      let reached: (url: URL) => void = () => undefined;
      const arrival = new Promise<URL>((resolve) => {
        reached = resolve;
      });
      await page.route(`${REDIRECT}**`, async (route) => {
        reached(new URL(route.request().url()));
        await route.fulfill({ status: 200, contentType: 'text/plain', body: 'back' });
      });
      await page.goto(url);
      await page.getByLabel('Login').fill(ALICE.login);
      await page.getByLabel('Password').fill(ALICE.password);
      await page.getByRole('button', { name: 'Sign in' }).click();
      expect((await sso.finish(await arrival, pending)).email).toBe('alice@example.com');
    } finally {
      await browser.close();
    }
  });

  it('the callback as the web role saw it behind a reverse proxy (another host) still completes the login', async () => {
    const sso = flow();
    const { callback, pending } = await loginWith(sso);
    const seen = new URL(`http://127.0.0.1:3000/auth/callback${callback.search}`);
    expect((await sso.finish(seen, pending)).subject).toBe('okta|00u1alice');
  });

  it("Entra ID's xms_edov stands in for the email_verified it never sends; a false or absent one does not", async () => {
    const sso = flow();
    const erin = await sso.begin();
    const erinBack = await new LoginBrowser().login(erin.url, REDIRECT, ERIN);
    expect(await sso.finish(erinBack, erin.pending)).toEqual({
      subject: 'entra-erin',
      email: 'erin@example.com',
      emailVerified: true,
    });
    const frank = await sso.begin();
    const frankBack = await new LoginBrowser().login(frank.url, REDIRECT, FRANK);
    expect((await sso.finish(frankBack, frank.pending)).emailVerified).toBe(false);
  });

  it('prompt=login asks for a new login even while the browser has a session at the provider', async () => {
    const sso = flow();
    const browser = new LoginBrowser();
    const first = await loginWith(sso, browser);
    await sso.finish(first.callback, first.pending);
    const before = op.logins();
    const second = await loginWith(sso, browser);
    expect(op.logins()).toBe(before + 1);
    expect((await sso.finish(second.callback, second.pending)).subject).toBe('okta|00u1alice');
  });

  it('refuses a tampered state, before the code is spent', async () => {
    const sso = flow();
    const { callback, pending } = await loginWith(sso);
    const tampered = new URL(callback);
    tampered.searchParams.set('state', `${pending.state.slice(0, -2)}xx`);
    const error = await refusal(sso.finish(tampered, pending), callback);
    expect(error.reason).toBe('state');
    // The same code with the right state still works: the refusal spent nothing.
    expect((await sso.finish(callback, pending)).subject).toBe('okta|00u1alice');
  });

  it('refuses a replayed callback: the code works once', async () => {
    const sso = flow();
    const { callback, pending } = await loginWith(sso);
    await sso.finish(callback, pending);
    const error = await refusal(sso.finish(callback, pending), callback);
    expect(error.reason).toBe('code');
    expect(error.message).toContain('start again from the link');
  });

  it('refuses an ID token with another nonce', async () => {
    const sso = flow();
    const { callback, pending } = await loginWith(sso);
    const error = await refusal(sso.finish(callback, { ...pending, nonce: `${pending.nonce}x` }), callback);
    expect(error.reason).toBe('nonce');
  });

  it('refuses a login that is not fresh (auth_time ten minutes old)', async () => {
    const sso = flow();
    op.setLoginAge(600);
    try {
      const { callback, pending } = await loginWith(sso);
      const error = await refusal(sso.finish(callback, pending), callback);
      expect(error.reason).toBe('stale');
    } finally {
      op.setLoginAge(0);
    }
  });

  it('a login the provider refuses is refused with its error word, never its description', async () => {
    const sso = flow();
    op.setRefusal('access_denied');
    try {
      const { callback, pending } = await loginWith(sso);
      expect(callback.searchParams.get('error_description')).toContain(ALICE.password);
      const error = (await sso.finish(callback, pending).catch((e: unknown) => e)) as SsoError;
      expect(error).toMatchObject({
        reason: 'refused',
        message: 'the SSO provider refused the login (access_denied)',
      });
      expect(inspect(error, { depth: 10 })).not.toContain(ALICE.password);
    } finally {
      op.setRefusal(undefined);
    }
  });

  it('a wrong client secret is refused with words about the client, never the secret', async () => {
    const sso = flow({ OIDC_CLIENT_SECRET: 'not-the-secret-5c1d' });
    const { callback, pending } = await loginWith(sso);
    const error = await refusal(sso.finish(callback, pending), callback);
    expect(error.reason).toBe('client');
    expect(error.message).toContain('OIDC_CLIENT_SECRET');
    expect(error.message).not.toContain('not-the-secret-5c1d');
  });

  it('sends OIDC_ACR_VALUES and refuses a login of another class', async () => {
    const sso = flow({ OIDC_ACR_VALUES: 'phr mfa' });
    const { url, pending } = await sso.begin();
    expect(new URL(url).searchParams.get('acr_values')).toBe('phr mfa');
    const callback = await new LoginBrowser().login(url, REDIRECT, ALICE);
    expect(op.asked.at(-1)?.get('acr_values')).toBe('phr mfa');
    expect((await sso.finish(callback, pending)).subject).toBe('okta|00u1alice');

    op.setAcr('pwd');
    try {
      const weak = await loginWith(sso);
      const error = await refusal(sso.finish(weak.callback, weak.pending), weak.callback);
      expect(error.reason).toBe('acr');
    } finally {
      op.setAcr(undefined);
    }
  });

  it('every call to the provider goes through HTTP_PROXY, unless NO_PROXY names it', async () => {
    const sso = flow({ HTTP_PROXY: proxy.url });
    const before = proxy.calls.length;
    const { callback, pending } = await loginWith(sso);
    expect((await sso.finish(callback, pending)).subject).toBe('okta|00u1alice');
    const targets = proxy.calls.slice(before).map((call) => new URL(call.target).pathname);
    // Discovery and the token endpoint (whose ID token needs no key: it came straight from the provider); the
    // browser's own requests go directly.
    expect(targets).toEqual(['/.well-known/openid-configuration', '/token']);

    // NO_PROXY naming the provider's host: directly, as every other client does.
    const direct = flow({ HTTP_PROXY: proxy.url, NO_PROXY: '127.0.0.1' });
    const calls = proxy.calls.length;
    const again = await loginWith(direct);
    expect((await direct.finish(again.callback, again.pending)).subject).toBe('okta|00u1alice');
    expect(proxy.calls.length).toBe(calls);
  });

  it('a provider that is down fails the login with a clear message; once it is back, the same flow logs in', async () => {
    const first = await startOidcProvider({ redirectUri: REDIRECT, accounts: [ALICE] });
    const { clientId, clientSecret } = first;
    const port = Number(new URL(first.issuer).port);
    await first.close();
    const sso = flow({
      OIDC_ISSUER: first.issuer,
      OIDC_CLIENT_ID: clientId,
      OIDC_CLIENT_SECRET: clientSecret,
    });
    await expect(sso.begin()).rejects.toMatchObject({
      name: 'SsoError',
      reason: 'discovery',
      message: 'the SSO provider could not be reached (ECONNREFUSED)',
    });
    // Back on the same port: the failure was not kept, discovery is asked again.
    const back = await startOidcProvider({
      redirectUri: REDIRECT,
      accounts: [ALICE],
      clientId,
      clientSecret,
      port,
    });
    try {
      const { url, pending } = await sso.begin();
      const callback = await new LoginBrowser().login(url, REDIRECT, ALICE);
      expect((await sso.finish(callback, pending)).subject).toBe('alice');
    } finally {
      await back.close();
    }
  });
});

describe("the approver's email, from Slack", () => {
  it('users.info gives it with users:read.email, and nothing without that scope', async () => {
    const slack = await startSlackStandIn({ botToken: 'xoxb-verify-sso-7e2a' });
    const api = new SlackApi({ apiUrl: slack.apiUrl, token: 'xoxb-verify-sso-7e2a' });
    try {
      expect(await standingOf(api, 'U0ALICE')).toEqual({ status: 'active', email: 'u0alice@example.com' });
      // Slack's user_not_found: nobody to compare an email with, and nobody who may decide.
      expect(await standingOf(api, 'not-a-user')).toEqual({ status: 'deactivated' });
      slack.deactivateUser('U0ALICE');
      expect(await standingOf(api, 'U0ALICE')).toEqual({ status: 'deactivated' });
      slack.deactivateUser('U0ALICE', false);
      slack.grantScopes(['users:read', 'chat:write']);
      expect(await standingOf(api, 'U0ALICE')).toEqual({ status: 'active' });
      slack.grantScopes(['chat:write']);
      expect(await standingOf(api, 'U0ALICE')).toEqual({ status: 'unknown', error: 'missing_scope' });
    } finally {
      await api.close();
      await slack.close();
    }
  });
});
