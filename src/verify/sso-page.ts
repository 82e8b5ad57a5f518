import { createHash, randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { completeVerified, isVerifyPurpose, movedOutcome, standingRefusal } from './completion.ts';
import type { PageHandler, VerifyPageDeps } from './deps.ts';
import { continuePage, messagePage } from './html.ts';
import {
  type CookieScope,
  pageHeaders,
  postSession,
  readBody,
  rootOf,
  SESSION_ENDED,
  sendHtml,
  sendOutcome,
  sessionCookie,
  sessionIdOf,
  TOO_MANY_OPENS,
} from './http.ts';
import { tokenKey } from './links.ts';
import { linkRefusal, SSO_NOT_ACCEPTED, slackUnsure } from './outcomes.ts';
import { cookieOf, setCookie } from './sessions.ts';
import { SsoError } from './sso-errors.ts';
import type { SsoPending } from './sso-flow.ts';

/*
 * The SSO leg of the page: a form POST starts the login (the page's CSRF token in the form), the provider sends the
 * browser back to /auth/callback. What the login needs to finish (state, nonce, PKCE verifier) and which link and page
 * it belongs to stay in Redis; the browser holds only an opaque id in a cookie sent to /auth/callback alone, SameSite
 * Lax because the provider's redirect back is a cross-site top-level GET.
 */

const PENDING_MS = 10 * 60_000;

/** The SSO cookie: `__Host-` (Path=/) on https; on http (trials) scoped to the callback's path. */
function ssoCookie(deps: CookieScope & { root: string }, value: string, maxAgeS: number): string {
  return setCookie(ssoCookieName(deps), value, {
    path: deps.secure ? '/' : `${deps.root}/auth/callback`,
    sameSite: 'Lax',
    secure: deps.secure,
    maxAgeS,
  });
}

const ssoCookieName = (scope: CookieScope) => (scope.secure ? '__Host-cloudops_sso' : 'cloudops_sso');

interface PendingLogin {
  pending: SsoPending;
  /** The link's token (its page is where the login started). */
  token: string;
  area: 'verify' | 'passkeys';
  /** The page session that started it (a registration page learns the login there). */
  session: string;
}

const pendingKey = (deps: VerifyPageDeps, id: string) =>
  `${deps.prefix}:verify:sso:${createHash('sha256').update(id).digest('hex')}`;

/** A redirect's headers: the page's own (CSP, no caching, no sniffing), as on every answer of the page. */
const redirectHeaders = pageHeaders('text/plain; charset=utf-8');

/** POST /verify/<token>/sso and /passkeys/<token>/sso: the page's form; redirects to the provider. */
export function ssoStart(area: 'verify' | 'passkeys'): PageHandler {
  return async (req, res, token, deps) => {
    // A POST without this link's page session is answered before its body is read: a stranger's body that never
    // ends would otherwise hold the connection until the server's request timeout.
    const link = tokenKey(token);
    const opened = await deps.sessions.resume(sessionIdOf(req, link, deps), link);
    if (!opened || !deps.sso) return sendOutcome(res, SESSION_ENDED, false);
    const form = new URLSearchParams((await readBody(req)) ?? '');
    const found = await postSession(req, deps, link, form.get('csrf') ?? undefined);
    if (!found || !deps.sso) return sendOutcome(res, SESSION_ENDED, false);
    const state = await deps.links.peek(token);
    if (state.status !== 'open') return sendOutcome(res, linkRefusal(state.status), false);
    if (isVerifyPurpose(state.purpose) !== (area === 'verify'))
      return sendOutcome(res, linkRefusal('unknown'), false);
    // A rule that asks for a passkey is not met by an SSO login: refused here, before the link could be used up.
    if (isVerifyPurpose(state.purpose) && !state.purpose.claims.methods.includes('sso'))
      return sendOutcome(res, SSO_NOT_ACCEPTED, false);
    // Each start keeps what the login needs for ten minutes: a flood of starts on one link is refused.
    if (!(await deps.sessions.ssoStart(link))) return sendOutcome(res, TOO_MANY_OPENS, false);
    let start: Awaited<ReturnType<typeof deps.sso.flow.begin>>;
    try {
      start = await deps.sso.flow.begin();
    } catch (error) {
      // The provider down or its discovery document unusable: the page says which (docs/approvals.md), not a 500.
      if (!(error instanceof SsoError)) throw error;
      return sendOutcome(res, { ...NOT_STARTED, text: `${error.message}. ${NOT_STARTED.text}` }, false);
    }
    const id = randomBytes(32).toString('base64url');
    const record: PendingLogin = { pending: start.pending, token, area, session: found.id };
    await deps.redis.set(pendingKey(deps, id), JSON.stringify(record), 'PX', PENDING_MS);
    res.writeHead(303, {
      ...redirectHeaders,
      location: start.url,
      'set-cookie': ssoCookie(deps, id, PENDING_MS / 1000),
    });
    res.end();
  };
}

/** The SSO login could not start: the provider's words follow. */
const NOT_STARTED = {
  title: 'The SSO login could not start',
  text: 'Nothing was counted. Try again in a moment; if it persists, tell an administrator (cloudops doctor checks the provider).',
  tone: 'refused' as const,
  status: 502,
};

/** The login of another person than the approver: nothing counts. */
const ANOTHER_PERSON = {
  title: 'The login was another person',
  text: 'The SSO login is not the person this link was sent to (their Slack email and a verified email from the login must match). Nothing was counted.',
  tone: 'refused' as const,
  status: 403,
};

/**
 * An email with its ASCII letters lower-cased and nothing else: toLowerCase() would also fold lookalikes onto ASCII
 * (the Kelvin sign U+212A to "k"), so another address at the provider would pass for the approver's.
 */
const asciiFold = (email: string) => email.replace(/[A-Z]/g, (c) => c.toLowerCase());

/** GET /auth/callback: finishes the login, checks it is the link's person, then counts (or proves, to register). */
export async function ssoCallback(
  req: IncomingMessage,
  res: ServerResponse,
  deps: VerifyPageDeps,
): Promise<void> {
  const id = cookieOf(req, ssoCookieName(deps));
  const sso = deps.sso;
  const json = id && sso ? await deps.redis.getdel(pendingKey(deps, id)) : null;
  const cleared = ssoCookie(deps, '', 0);
  const extra = { 'set-cookie': cleared };
  const root = rootOf(res);
  const page = (o: { title: string; text: string; tone: 'ok' | 'refused'; status?: number }) =>
    sendHtml(
      res,
      o.status ?? (o.tone === 'ok' ? 200 : 409),
      messagePage(o.title, o.text, o.tone, root),
      extra,
    );
  if (!json || !sso) return page(SESSION_ENDED);
  const login = JSON.parse(json) as PendingLogin;
  const state = await deps.links.peek(login.token);
  if (state.status !== 'open') return page(linkRefusal(state.status));
  let identity: Awaited<ReturnType<typeof sso.flow.finish>>;
  try {
    identity = await sso.flow.finish(new URL(req.url ?? '/', deps.rp.origin), login.pending);
  } catch (error) {
    // SsoError messages are safe to show; anything else is not repeated.
    const text = error instanceof Error && error.name === 'SsoError' ? error.message : 'The login failed.';
    return page({
      title: 'The SSO login did not finish',
      text: `${text} Nothing was counted.`,
      tone: 'refused',
    });
  }
  const purpose = state.purpose;
  const user = purpose.kind === 'register' ? purpose.user : purpose.claims.approver;
  // One users.info: whether the person still stands in Slack (as on the passkey leg, someone deactivated since the
  // link was sent decides nothing), and the email the provider's must equal.
  const standing = await deps.standing(user);
  if (isVerifyPurpose(purpose)) {
    const refused = standingRefusal(deps, purpose, standing);
    if (refused) return page(refused);
  } else if (standing.status === 'unknown') {
    // Slack could not say (a rate limit, an outage): nothing counts, the link is kept.
    deps.logger.warn({ slackError: standing.error }, "could not read the link's person's email from Slack");
    return page(slackUnsure(false));
  }
  const expected = standing.status === 'active' ? standing.email : undefined;
  const matches =
    identity.emailVerified &&
    identity.email !== undefined &&
    expected !== undefined &&
    asciiFold(identity.email) === asciiFold(expected);
  if (!matches) return page(ANOTHER_PERSON);
  if (purpose.kind === 'register') {
    // The registration page learns the login through a new session that replaces the one that started it (new id,
    // new cookie): a session id planted in the browser before the login, which its planter also holds, proves nothing.
    const link = tokenKey(login.token);
    const renewed = await deps.sessions.renew(login.session, link, `sso:${identity.subject}`);
    const path = `${deps.root}/passkeys/${login.token}`;
    const session = sessionCookie(renewed.id, path, link, deps);
    // A link, not a redirect: a redirect chain that began at the provider (another site) would not carry the
    // page's SameSite=Strict session cookie, and the page would not know the login.
    return sendHtml(res, 200, continuePage(path, root), { 'set-cookie': [cleared, session] });
  }
  const moved = movedOutcome(purpose, await deps.requests.get(purpose.claims.requestId));
  if (moved) return page(moved);
  const used = await deps.links.consume(login.token);
  if (used !== 'ok') return page(linkRefusal(used));
  page(await completeVerified(deps, purpose, { method: 'sso', subject: identity.subject }));
}
