/**
 * The SSO login's failures, each with a message safe to show the approver and to log: never the code, a token, the
 * client secret or what the provider echoed back. openid-client's own errors carry the callback's parameters (the
 * code among them) and the token endpoint's answer as their cause, so none of them is kept as a cause here.
 */
import * as oidc from 'openid-client';

/** Why an SSO login failed, for the page's words and the logs. */
export type SsoErrorReason =
  /** The provider's discovery document could not be fetched or used. */
  | 'discovery'
  /** The provider could not be reached, or did not answer in time. */
  | 'unreachable'
  /** The answer does not belong to this login (state). */
  | 'state'
  /** The ID token was issued for another login (nonce). */
  | 'nonce'
  /** The login was not fresh (auth_time), or the provider did not say when it happened. */
  | 'stale'
  /** The login was not of the class OIDC_ACR_VALUES asks for. */
  | 'acr'
  /** The provider refused the login (the person cancelled, or a policy refused it). */
  | 'refused'
  /** The code was refused at the token endpoint: used already, expired, or not this client's. */
  | 'code'
  /** The provider refused cloudops's client id or secret. */
  | 'client'
  /** Anything else the ID token or the answers failed. */
  | 'invalid';

/** A failed SSO login; `message` is safe to show and to log. */
export class SsoError extends Error {
  override readonly name = 'SsoError';
  readonly code = 'SSO_FAILED';
  constructor(
    readonly reason: SsoErrorReason,
    message: string,
    /** openid-client's error code (e.g. `OAUTH_JWT_CLAIM_COMPARISON_FAILED`), or the network failure's code. */
    readonly detail?: string,
  ) {
    super(message);
  }
}

/** OAuth error codes are registered words; anything else in that field is not repeated. */
const OAUTH_WORD = /^[a-z_]{1,40}$/;

/** openid-client's or the network's error as an {@link SsoError}; `during` says which step failed. */
export function ssoErrorOf(error: unknown, during: 'discovery' | 'login'): SsoError {
  if (error instanceof SsoError) return error;
  if (error instanceof oidc.AuthorizationResponseError) {
    const word = OAUTH_WORD.test(error.error) ? ` (${error.error})` : '';
    return new SsoError('refused', `the SSO provider refused the login${word}`, error.code);
  }
  // A 401 with a challenge is the token endpoint refusing the client's authentication.
  if (error instanceof oidc.WWWAuthenticateChallengeError && error.status === 401)
    return new SsoError(
      'client',
      "the SSO provider refused cloudops's client: check OIDC_CLIENT_ID and OIDC_CLIENT_SECRET",
      error.code,
    );
  if (error instanceof oidc.ResponseBodyError) {
    if (error.error === 'invalid_client' || error.error === 'unauthorized_client')
      return new SsoError(
        'client',
        `the SSO provider refused cloudops's client (${error.error}): check OIDC_CLIENT_ID and OIDC_CLIENT_SECRET`,
        error.code,
      );
    if (error.error === 'invalid_grant')
      return new SsoError(
        'code',
        'the SSO provider refused this login’s code (used already, or expired): start again from the link',
        error.code,
      );
    const word = OAUTH_WORD.test(error.error) ? error.error : 'an error';
    return new SsoError('invalid', `the SSO provider answered with ${word}`, error.code);
  }
  const code = codeOf(error);
  const claim = claimOf(error);
  if (claim === 'nonce')
    return new SsoError('nonce', 'the SSO provider’s ID token was issued for another login', code);
  if (claim === 'auth_time')
    return new SsoError(
      'stale',
      'the SSO login was not fresh: the provider reused an earlier login instead of asking again',
      code,
    );
  if (code !== undefined && !code.startsWith('OAUTH_') && !code.startsWith('ERR_JWS'))
    return new SsoError(
      during === 'discovery' ? 'discovery' : 'unreachable',
      `the SSO provider could not be reached (${code})`,
      code,
    );
  if (during === 'discovery')
    return new SsoError(
      'discovery',
      "the SSO provider's discovery document could not be used: check OIDC_ISSUER (cloudops doctor says more)",
      code,
    );
  return new SsoError('invalid', 'the SSO provider’s answer could not be checked', code);
}

/** The first `code` string along the error's causes: openid-client's, or the network's (ECONNREFUSED…). */
function codeOf(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current; depth++) {
    const { code, name } = current as { code?: unknown; name?: unknown };
    if (typeof code === 'string') return code;
    if (name === 'TimeoutError' || name === 'AbortError') return 'no answer in time';
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/** The ID token claim a claim check failed on (oauth4webapi names it in the cause). */
function claimOf(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current; depth++) {
    const { claim } = (current as { cause?: { claim?: unknown } }).cause ?? {};
    if (typeof claim === 'string') return claim;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}
