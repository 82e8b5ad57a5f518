/**
 * The SSO login of verified approvals (docs/approvals.md): OpenID Connect's authorization code flow with PKCE (S256),
 * state and nonce, asking the provider for a fresh login (`prompt=login`, `max_age=0`) and refusing an ID token whose
 * `auth_time` is not fresh. Every call to the provider goes through the outbound dispatcher, so the company proxy
 * applies. The provider's discovery document is fetched once per process, at the first login, and fetched again
 * after a failure: a provider that is down at start-up stops nothing but the SSO logins tried meanwhile.
 */
import { timingSafeEqual } from 'node:crypto';
import * as oidc from 'openid-client';
import { type Dispatcher, fetch as undiciFetch } from 'undici';
import { type Env, oidcRedirectUri } from '../config/env.ts';
import { outboundDispatcher } from '../config/outbound.ts';
import { SsoError, ssoErrorOf } from './sso-errors.ts';
import type { SsoFlow, SsoIdentity, SsoPending, SsoStart } from './sso-flow.ts';

export { SsoError, type SsoErrorReason } from './sso-errors.ts';

/** What the flow reads from the environment. */
export type SsoEnv = Pick<
  Env,
  | 'PUBLIC_URL'
  | 'OIDC_ISSUER'
  | 'OIDC_CLIENT_ID'
  | 'OIDC_CLIENT_SECRET'
  | 'OIDC_ACR_VALUES'
  | 'HTTPS_PROXY'
  | 'HTTP_PROXY'
  | 'NO_PROXY'
>;

export interface SsoFlowOptions {
  /** One call to the provider's limit, in seconds (openid-client's `timeout`; default 10). */
  timeoutSeconds?: number;
  /** Tests may pass their own; the default is `outboundDispatcher(env)`, closed by `close()`. */
  dispatcher?: Dispatcher;
}

/** The SSO login, and `close()` for the dispatcher it opened. */
export interface SsoFlowHandle extends SsoFlow {
  close(): Promise<void>;
}

/** Loopback hosts: only there may the provider be plain http (trials and tests; env.ts allows nothing else). */
const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * The SSO login for `env` (OIDC_ISSUER, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, PUBLIC_URL; OIDC_ACR_VALUES when set).
 * Throws at once when one of them is missing (the environment's own check names them at start-up).
 */
export function createSsoFlow(env: SsoEnv, options: SsoFlowOptions = {}): SsoFlowHandle {
  const { OIDC_ISSUER: issuer, OIDC_CLIENT_ID: clientId, OIDC_CLIENT_SECRET: secret } = env;
  const redirectUri = oidcRedirectUri(env);
  if (!issuer || !clientId || !secret || !redirectUri)
    throw new Error('the SSO login needs OIDC_ISSUER, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET and PUBLIC_URL');
  const issuerUrl = new URL(issuer);
  const insecure = issuerUrl.protocol === 'http:' && LOOPBACK.has(issuerUrl.hostname);
  if (issuerUrl.protocol !== 'https:' && !insecure)
    throw new Error('OIDC_ISSUER must be an https URL (http only on 127.0.0.1 or localhost)');
  const acrValues = env.OIDC_ACR_VALUES?.split(' ');
  const ownsDispatcher = options.dispatcher === undefined;
  const dispatcher = options.dispatcher ?? outboundDispatcher(env);
  // undici's fetch with our dispatcher: the same way out as every other outbound call (proxy included).
  const viaDispatcher: oidc.CustomFetch = (url, init) =>
    undiciFetch(url, { ...init, dispatcher } as Parameters<
      typeof undiciFetch
    >[1]) as unknown as Promise<Response>;
  const timeout = options.timeoutSeconds ?? 10;

  let discovered: Promise<oidc.Configuration> | undefined;
  const configuration = (): Promise<oidc.Configuration> => {
    discovered ??= discover().catch((error: unknown) => {
      // Not kept: the next login asks the provider again.
      discovered = undefined;
      throw ssoErrorOf(error, 'discovery');
    });
    return discovered;
  };

  async function discover(): Promise<oidc.Configuration> {
    const found = await oidc.discovery(issuerUrl, clientId as string, undefined, undefined, {
      [oidc.customFetch]: viaDispatcher,
      execute: insecure ? [oidc.allowInsecureRequests] : [],
      timeout,
    });
    const server = found.serverMetadata();
    // client_secret_basic where the provider offers it (the default of the spec), else client_secret_post.
    const methods = server.token_endpoint_auth_methods_supported;
    const basic = methods === undefined || methods.includes('client_secret_basic');
    const config = new oidc.Configuration(
      server,
      clientId as string,
      { client_secret: secret },
      basic ? oidc.ClientSecretBasic(secret) : oidc.ClientSecretPost(secret),
    );
    config[oidc.customFetch] = viaDispatcher;
    config.timeout = timeout;
    if (insecure) oidc.allowInsecureRequests(config);
    return config;
  }

  return {
    async begin(): Promise<SsoStart> {
      const config = await configuration();
      const pending: SsoPending = {
        state: oidc.randomState(),
        nonce: oidc.randomNonce(),
        codeVerifier: oidc.randomPKCECodeVerifier(),
      };
      const parameters: Record<string, string> = {
        redirect_uri: redirectUri,
        response_type: 'code',
        scope: 'openid email',
        state: pending.state,
        nonce: pending.nonce,
        code_challenge: await oidc.calculatePKCECodeChallenge(pending.codeVerifier),
        code_challenge_method: 'S256',
        // A fresh login, whatever session the approver's browser has at the provider.
        prompt: 'login',
        max_age: '0',
      };
      if (env.OIDC_ACR_VALUES) parameters.acr_values = env.OIDC_ACR_VALUES;
      return { url: oidc.buildAuthorizationUrl(config, parameters).href, pending };
    },

    async finish(callbackUrl: URL, pending: SsoPending): Promise<SsoIdentity> {
      // Checked here as well as by openid-client, so that a foreign answer never reaches the token endpoint.
      const state = callbackUrl.searchParams.get('state');
      if (state === null || !sameText(state, pending.state))
        throw new SsoError('state', 'this answer from the SSO provider belongs to another login');
      const config = await configuration();
      // The registered redirect URI with the provider's answer: the page may be behind a proxy that rewrote the host.
      const current = new URL(redirectUri);
      current.search = callbackUrl.search;
      let claims: oidc.IDToken | undefined;
      try {
        const tokens = await oidc.authorizationCodeGrant(config, current, {
          pkceCodeVerifier: pending.codeVerifier,
          expectedState: pending.state,
          expectedNonce: pending.nonce,
          maxAge: 0,
        });
        claims = tokens.claims();
      } catch (error) {
        throw ssoErrorOf(error, 'login');
      }
      if (claims === undefined) throw new SsoError('invalid', 'the SSO provider sent no ID token');
      if (typeof claims.auth_time !== 'number')
        throw new SsoError(
          'stale',
          'the SSO provider did not say when the login happened (auth_time), so its freshness cannot be checked',
        );
      if (acrValues !== undefined && (typeof claims.acr !== 'string' || !acrValues.includes(claims.acr)))
        throw new SsoError(
          'acr',
          `the SSO login was not of the kind asked for (OIDC_ACR_VALUES ${acrValues.join(' ')})`,
        );
      return {
        subject: claims.sub,
        email: typeof claims.email === 'string' ? claims.email : undefined,
        // Microsoft Entra ID never sends email_verified; its optional claim xms_edov (the email's domain owner is
        // verified) says the same of an organisation's own addresses (docs/approvals.md#microsoft-entra-id).
        emailVerified:
          claims.email_verified === true || (claims.email_verified === undefined && claims.xms_edov === true),
      };
    },

    async close(): Promise<void> {
      if (ownsDispatcher) await dispatcher.close();
    },
  };
}

function sameText(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}
