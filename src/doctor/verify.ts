/**
 * The checks of verified approvals (docs/policy.md#verified-approvals), run when the policy says `verify:` or the
 * environment sets PUBLIC_URL or OIDC_ISSUER: what the policy needs is set, PUBLIC_URL answers, the provider's
 * discovery document is there and fits, and Slack gives approvers' emails (users:read.email).
 */
import { request } from 'undici';
import { failureCode } from '../cloud/probe.ts';
import type { Env } from '../config/env.ts';
import { outboundDispatcher, type ProxyEnv } from '../config/outbound.ts';
import type { Policy } from '../config/policy.ts';
import { fieldOf } from '../config/policy-problems.ts';
import { unmetVerify, unmetWords, verifyUses } from '../config/verification-uses.ts';
import type { SlackApi } from '../slack-api/client.ts';
import { SlackPlatformError } from '../slack-api/errors.ts';
import { type CheckResult, fail, ok, warn } from './report.ts';

/** Each HTTP look's limit. */
export const VERIFY_CHECK_MS = 5_000;

/** Whether verified approvals are in use at all: otherwise doctor shows none of these checks. */
export function verifyInUse(env: Env, policy: Policy | undefined): boolean {
  return (
    env.PUBLIC_URL !== undefined ||
    env.OIDC_ISSUER !== undefined ||
    (policy !== undefined && verifyUses(policy).length > 0)
  );
}

/** Whether the SSO login is in use: the policy names `sso`, or the provider is configured. */
export function ssoInUse(env: Env, policy: Policy | undefined): boolean {
  return (
    env.OIDC_ISSUER !== undefined ||
    (policy !== undefined && verifyUses(policy).some((use) => use.methods.includes('sso')))
  );
}

/** The policy's `verify:` against the environment: the same rule that stops the web role's start-up. */
export function checkVerifyEnvironment(env: Env, policy: Policy | undefined): CheckResult {
  const unmet = policy && unmetVerify(env, policy);
  if (unmet)
    return fail(
      'verify.environment',
      `verified approvals: ${fieldOf(unmet.path)}: ${unmet.method} needs ${unmet.missing.join(', ')}, which ${unmet.missing.length === 1 ? 'is' : 'are'} not set`,
      unmetWords(unmet).split('; ').slice(1).join('; '),
    );
  const methods = [...new Set((policy ? verifyUses(policy) : []).flatMap((use) => use.methods))];
  return ok(
    'verify.environment',
    methods.length > 0
      ? `verified approvals: the policy asks for ${methods.join(' and ')}, and the environment has what ${methods.length === 1 ? 'it needs' : 'they need'}`
      : 'verified approvals: no verify in the policy',
  );
}

/** One GET with a deadline, through the outbound proxy where one is set: the status and the body, or the failure's code. */
async function get(
  url: string,
  proxy: ProxyEnv,
  timeoutMs: number,
): Promise<{ status: number; body: string } | { error: string }> {
  const dispatcher = outboundDispatcher(proxy, { connect: { timeout: timeoutMs }, keepAliveTimeout: 1_000 });
  try {
    const response = await request(url, {
      method: 'GET',
      headers: { accept: 'application/json, text/plain, */*' },
      dispatcher,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    });
    // A page bigger than this is not a discovery document or a health answer.
    const body = (await response.body.text()).slice(0, 100_000);
    return { status: response.statusCode, body };
  } catch (error) {
    return { error: failureCode(error) };
  } finally {
    await dispatcher.close().catch(() => undefined);
  }
}

/**
 * PUBLIC_URL reaches the web role: its `/healthz` answers 200. A browser of an approver may see another network than
 * this machine; this says only what this machine sees.
 */
export async function checkPublicUrl(
  publicUrl: string,
  proxy: ProxyEnv = {},
  timeoutMs = VERIFY_CHECK_MS,
): Promise<CheckResult> {
  const id = 'verify.public-url';
  const url = `${publicUrl}/healthz`;
  const answer = await get(url, proxy, timeoutMs);
  if ('error' in answer)
    return fail(
      id,
      `PUBLIC_URL does not answer from here (${answer.error} at ${url})`,
      "point PUBLIC_URL at the web role as approvers' browsers reach it (a reverse proxy or load balancer in front of PORT), and make sure it runs",
    );
  if (answer.status !== 200)
    return warn(
      id,
      `PUBLIC_URL answers, but ${url} gave HTTP ${answer.status}, not the web role's 200`,
      'check that PUBLIC_URL leads to the web role (ROLE all or web), not to another service',
    );
  return ok(id, `PUBLIC_URL answers: ${url} is the web role`);
}

/** The fields of a discovery document the SSO login uses (OpenID Connect Discovery 1.0). */
interface Discovery {
  issuer?: unknown;
  authorization_endpoint?: unknown;
  token_endpoint?: unknown;
  jwks_uri?: unknown;
  code_challenge_methods_supported?: unknown;
  token_endpoint_auth_methods_supported?: unknown;
  claims_supported?: unknown;
  prompt_values_supported?: unknown;
  acr_values_supported?: unknown;
}

/** A list of strings a discovery document gives, or undefined where it says nothing (then nothing is assumed). */
const listed = (value: unknown): string[] | undefined =>
  Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : undefined;

/**
 * The provider's discovery document at `${OIDC_ISSUER}/.well-known/openid-configuration`: it is JSON, names the
 * same issuer, has the endpoints the login uses, and, where it says what it supports, supports PKCE with S256, a
 * client secret (basic or post), the acr values OIDC_ACR_VALUES asks for, and names `auth_time` and `email` among its
 * claims and `login` among its prompts (a warning: the login is refused without them).
 */
export async function checkOidcDiscovery(
  issuer: string,
  proxy: ProxyEnv = {},
  timeoutMs = VERIFY_CHECK_MS,
  acrValues?: string,
): Promise<CheckResult> {
  const id = 'verify.oidc-discovery';
  const url = `${issuer}/.well-known/openid-configuration`;
  const fix = "set OIDC_ISSUER to the provider's issuer URL exactly as its discovery document names it";
  const answer = await get(url, proxy, timeoutMs);
  if ('error' in answer)
    return fail(
      id,
      `the SSO provider does not answer (${answer.error} at ${url})`,
      `${fix}, and check the network to it`,
    );
  if (answer.status !== 200)
    return fail(id, `the SSO provider has no discovery document: HTTP ${answer.status} at ${url}`, fix);
  let doc: Discovery;
  try {
    doc = JSON.parse(answer.body) as Discovery;
  } catch {
    return fail(id, `the SSO provider's discovery document at ${url} is not JSON`, fix);
  }
  if (typeof doc !== 'object' || doc === null)
    return fail(id, `the SSO provider's discovery document at ${url} is not a JSON object`, fix);
  const named = typeof doc.issuer === 'string' ? doc.issuer.replace(/\/+$/, '') : undefined;
  if (named !== issuer)
    return fail(
      id,
      `the discovery document names the issuer ${typeof doc.issuer === 'string' ? doc.issuer : '(none)'}, not OIDC_ISSUER ${issuer}`,
      fix,
    );
  const missing = (['authorization_endpoint', 'token_endpoint', 'jwks_uri'] as const).filter(
    (field) => typeof doc[field] !== 'string',
  );
  if (missing.length > 0)
    return fail(
      id,
      `the discovery document at ${url} lacks ${missing.join(', ')}`,
      'use an OpenID Connect provider',
    );
  const pkce = doc.code_challenge_methods_supported;
  if (Array.isArray(pkce) && !pkce.includes('S256'))
    return fail(
      id,
      'the SSO provider does not offer PKCE with S256 (code_challenge_methods_supported)',
      "enable PKCE (S256) for the client in the provider's settings",
    );
  const auth = listed(doc.token_endpoint_auth_methods_supported);
  if (auth && !auth.includes('client_secret_basic') && !auth.includes('client_secret_post'))
    return fail(
      id,
      `the SSO provider takes no client secret at its token endpoint (it offers ${auth.join(', ') || 'nothing'})`,
      'register cloudops at the provider as a confidential web client with a client secret (docs/approvals.md)',
    );
  const acr = listed(doc.acr_values_supported);
  const asked = acrValues?.split(' ') ?? [];
  if (asked.length > 0 && acr && !asked.some((value) => acr.includes(value)))
    return fail(
      id,
      `OIDC_ACR_VALUES asks for ${asked.join(' ')}, and the SSO provider offers ${acr.join(', ') || 'no acr values'}`,
      "set OIDC_ACR_VALUES to values the provider lists in acr_values_supported, or unset it and require MFA in the provider's own policy",
    );
  const claims = listed(doc.claims_supported);
  const lacking = claims ? ['auth_time', 'email'].filter((claim) => !claims.includes(claim)) : [];
  if (lacking.length > 0)
    return warn(
      id,
      `the SSO provider does not list ${lacking.join(' and ')} among its claims (claims_supported); the login is refused when the ID token lacks ${lacking.length === 1 ? 'it' : 'them'}`,
      'try one verification end to end; if it fails, add the claims to the ID token in the provider (docs/approvals.md)',
    );
  const prompts = listed(doc.prompt_values_supported);
  if (prompts && !prompts.includes('login'))
    return warn(
      id,
      'the SSO provider does not list prompt=login (prompt_values_supported): it may not ask approvers to log in again',
      'check that the provider asks for a fresh login; cloudops refuses an ID token whose auth_time is older than 30 s',
    );
  return ok(id, `the SSO provider's discovery document fits: issuer ${issuer}`);
}

/**
 * Slack gives approvers' emails, which the SSO login's verified email must equal: the token has users:read and
 * users:read.email, and users.info of an approver the policy names carries an email.
 */
export async function checkApproverEmail(
  slack: SlackApi,
  granted: Set<string>,
  policy: Policy | undefined,
): Promise<CheckResult> {
  const id = 'verify.slack-email';
  const fix =
    "add users:read and users:read.email under the app's OAuth & Permissions → Bot Token Scopes (or update the app from manifest.yml), then reinstall it";
  const missing = ['users:read', 'users:read.email'].filter((scope) => !granted.has(scope));
  if (missing.length > 0)
    return fail(
      id,
      `verify: sso compares the approver's Slack email, and the token lacks ${missing.join(', ')}`,
      fix,
    );
  const approver = policy && firstApprover(policy);
  if (!approver)
    return ok(id, 'Slack grants users:read.email (no approver user id in the policy to ask about)');
  try {
    const answer = await slack.call<{ ok: true; user?: { profile?: { email?: unknown } } }>('users.info', {
      user: approver,
    });
    if (typeof answer.user?.profile?.email === 'string' && answer.user.profile.email.includes('@'))
      return ok(id, `Slack gives approvers' emails (users.info of ${approver})`);
    return fail(id, `Slack gave no email for approver ${approver} (users.info)`, fix);
  } catch (error) {
    const why = error instanceof SlackPlatformError ? error.error : failureCode(error);
    return fail(id, `users.info of approver ${approver} failed (${why})`, fix);
  }
}

/** The first user id (not a group) the policy names as an approver. */
function firstApprover(policy: Policy): string | undefined {
  const ids = [...policy.approvers, ...policy.projects.flatMap((p) => p.approvers ?? [])];
  return ids.find((id) => /^[UW]/.test(id));
}
