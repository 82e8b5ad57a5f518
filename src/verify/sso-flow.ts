/*
 * The contract between the verification page (src/verify/, which owns the links, the session cookie and the routes)
 * and the SSO login (src/verify/sso.ts, OpenID Connect through openid-client). The page keeps `SsoPending` on the
 * server beside the link while the approver is away at the provider; the provider's redirect comes back to
 * `${PUBLIC_URL}/auth/callback` and the page hands it to `finish`.
 */

/** What the page keeps, server side, between sending the approver to the provider and their return. */
export interface SsoPending {
  state: string;
  nonce: string;
  codeVerifier: string;
}

/** Where to send the approver's browser, and what to keep until they come back. */
export interface SsoStart {
  url: string;
  pending: SsoPending;
}

/** Who the provider says logged in, from the checked ID token. */
export interface SsoIdentity {
  /** The ID token's `sub`: named in the audit entry and the message. */
  subject: string;
  /** The ID token's `email`; undefined when the provider sent none. */
  email: string | undefined;
  /** The ID token's `email_verified` is true (or, where a provider never sends it, Entra ID's `xms_edov`). */
  emailVerified: boolean;
}

/** The SSO login a verified approval may ask for: a fresh login (prompt=login, max_age=0) with PKCE, state and nonce. */
export interface SsoFlow {
  begin(): Promise<SsoStart>;
  /**
   * Completes the login from the provider's redirect (the full callback URL as the browser requested it): checks
   * state, nonce, the login's freshness and the ID token; throws an error with a message safe to show when it fails.
   */
  finish(callbackUrl: URL, pending: SsoPending): Promise<SsoIdentity>;
}
