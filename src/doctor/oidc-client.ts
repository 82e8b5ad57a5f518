/**
 * Whether the SSO provider accepts cloudops's client: the token endpoint is asked to exchange a code that does not
 * exist. A provider that knows the client and its secret refuses the code (`invalid_grant`); one that does not refuses
 * the client (`invalid_client`, HTTP 401). Nothing is granted either way, and the secret is never shown.
 */
import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { failureCode } from '../cloud/probe.ts';
import { type Env, oidcRedirectUri } from '../config/env.ts';
import { outboundDispatcher } from '../config/outbound.ts';
import { type CheckResult, fail, ok, warn } from './report.ts';
import { VERIFY_CHECK_MS } from './verify.ts';

type ClientEnv = Pick<
  Env,
  | 'OIDC_ISSUER'
  | 'OIDC_CLIENT_ID'
  | 'OIDC_CLIENT_SECRET'
  | 'PUBLIC_URL'
  | 'HTTPS_PROXY'
  | 'HTTP_PROXY'
  | 'NO_PROXY'
>;

/** OAuth error codes are registered words; anything else in that field is not repeated. */
const OAUTH_WORD = /^[a-z_]{1,40}$/;

/** `verify.oidc-client`; undefined when the provider is not configured or its discovery document is unusable. */
export async function checkOidcClient(
  env: ClientEnv,
  timeoutMs = VERIFY_CHECK_MS,
): Promise<CheckResult | undefined> {
  const { OIDC_ISSUER: issuer, OIDC_CLIENT_ID: clientId, OIDC_CLIENT_SECRET: secret } = env;
  const redirectUri = oidcRedirectUri(env);
  if (!issuer || !clientId || !secret || !redirectUri) return undefined;
  const id = 'verify.oidc-client';
  const fix =
    "copy the client id and secret of cloudops's client at the provider into OIDC_CLIENT_ID and OIDC_CLIENT_SECRET";
  const dispatcher = outboundDispatcher(env, { connect: { timeout: timeoutMs }, keepAliveTimeout: 1_000 });
  try {
    const discovery = await ask(`${issuer}/.well-known/openid-configuration`, {}, undefined).catch(
      () => undefined,
    );
    const doc = discovery && parsed(discovery.body);
    const tokenEndpoint = doc?.token_endpoint;
    // The discovery check reports why; this one has nothing to add.
    if (typeof tokenEndpoint !== 'string' || !URL.canParse(tokenEndpoint)) return undefined;
    const methods = Array.isArray(doc?.token_endpoint_auth_methods_supported)
      ? doc.token_endpoint_auth_methods_supported
      : undefined;
    const basic = methods === undefined || methods.includes('client_secret_basic');
    const form = new URLSearchParams({
      grant_type: 'authorization_code',
      code: `cloudops-doctor-${randomBytes(16).toString('hex')}`,
      redirect_uri: redirectUri,
      ...(basic ? {} : { client_id: clientId, client_secret: secret }),
    });
    // RFC 6749 2.3.1: each part form-encoded before the Basic encoding.
    const encode = (part: string) => encodeURIComponent(part).replace(/%20/g, '+');
    const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
    if (basic)
      headers.authorization = `Basic ${Buffer.from(`${encode(clientId)}:${encode(secret)}`).toString('base64')}`;
    const answer = await ask(tokenEndpoint, headers, form.toString());
    if (answer === undefined) return undefined;
    const error = parsed(answer.body)?.error;
    const word = typeof error === 'string' && OAUTH_WORD.test(error) ? error : undefined;
    if (word === 'invalid_grant')
      return ok(id, `the SSO provider accepts OIDC_CLIENT_ID ${clientId} and its secret`);
    if (answer.status === 401 || word === 'invalid_client' || word === 'unauthorized_client')
      return fail(
        id,
        `the SSO provider refuses OIDC_CLIENT_ID ${clientId} with its secret (HTTP ${answer.status}${word ? `, ${word}` : ''})`,
        fix,
      );
    return warn(
      id,
      `the SSO provider's token endpoint gave HTTP ${answer.status}${word ? ` (${word})` : ''} to a made-up code, not invalid_grant: cannot tell whether it accepts OIDC_CLIENT_ID ${clientId}`,
      `${fix}, then try one verification end to end`,
    );
  } catch (error) {
    return fail(
      id,
      `the SSO provider's token endpoint does not answer (${failureCode(error)})`,
      'check the network to it',
    );
  } finally {
    await dispatcher.close().catch(() => undefined);
  }

  async function ask(
    url: string,
    headers: Record<string, string>,
    body: string | undefined,
  ): Promise<{ status: number; body: string } | undefined> {
    const answer = await request(url, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { accept: 'application/json', ...headers },
      body,
      dispatcher,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = (await answer.body.text()).slice(0, 100_000);
    if (body === undefined && answer.statusCode !== 200) return undefined;
    return { status: answer.statusCode, body: text };
  }
}

function parsed(body: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(body);
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
