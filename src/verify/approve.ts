import type { AuthenticationResponseJSON } from '@simplewebauthn/server';
import { completeVerified, isVerifyPurpose, movedOutcome, standingOutcome } from './completion.ts';
import type { PageHandler, VerifyPageDeps } from './deps.ts';
import { approvalPage } from './html.ts';
import {
  readJson,
  scriptPostSession,
  sendHtml,
  sendJson,
  sendOutcome,
  sessionCookie,
  sessionIdOf,
  TOO_MANY_OPENS,
} from './http.ts';
import { tokenKey } from './links.ts';
import { FOREIGN_PASSKEY, linkRefusal, PASSKEY_FAILED } from './outcomes.ts';
import { assertionOptions, checkAssertion } from './passkeys.ts';
import { ssoStart } from './sso-page.ts';

/*
 * An approval (or break-glass) link's page: GET shows the request and the methods its rule allows (reads the link,
 * uses nothing up); the passkey POSTs run the assertion, and only a passkey of the link's person that verifies uses
 * the link up and counts the approval (or runs the break glass) through the lifecycle.
 */

/** The open approval or break-glass link of `token`, or the outcome saying why it cannot be used. */
async function openPurpose(deps: VerifyPageDeps, token: string) {
  const state = await deps.links.peek(token);
  if (state.status !== 'open') return { refusal: linkRefusal(state.status) };
  if (!isVerifyPurpose(state.purpose)) return { refusal: linkRefusal('unknown') };
  return { purpose: state.purpose };
}

const show: PageHandler = async (req, res, token, deps) => {
  const { purpose, refusal } = await openPurpose(deps, token);
  if (!purpose) return sendOutcome(res, refusal, false);
  const { claims } = purpose;
  const request = await deps.requests.get(claims.requestId);
  const moved = movedOutcome(purpose, request);
  if (moved || !request) return sendOutcome(res, moved ?? linkRefusal('unknown'), false);
  const base = `${deps.root}/verify/${token}`;
  const link = tokenKey(token);
  // A page opened again in the same browser keeps its session; a new one counts against the link's cap.
  const session =
    (await deps.sessions.resume(sessionIdOf(req, link, deps), link)) ?? (await deps.sessions.open(link));
  if (!session) return sendOutcome(res, TOO_MANY_OPENS, false);
  sendHtml(
    res,
    200,
    approvalPage({
      request,
      approver: claims.approver,
      methods: claims.methods,
      base,
      csrf: session.csrf,
      ssoAvailable: deps.sso !== undefined,
      root: deps.root,
      ...(purpose.kind === 'break_glass' ? { breakGlass: { reason: purpose.claims.reason } } : {}),
    }),
    { 'set-cookie': sessionCookie(session.id, base, link, deps) },
    // Chrome applies form-action to the redirect that follows the SSO form: the provider's origin is allowed too.
    deps.sso ? [deps.sso.issuerOrigin] : [],
  );
};

/** The page session of a POST with its CSRF header; undefined after answering that the session ended. */
function sessionOf(
  req: Parameters<PageHandler>[0],
  res: Parameters<PageHandler>[1],
  token: string,
  deps: VerifyPageDeps,
) {
  return scriptPostSession(req, res, deps, tokenKey(token));
}

const passkeyOptions: PageHandler = async (req, res, token, deps) => {
  const found = await sessionOf(req, res, token, deps);
  if (!found) return;
  const { purpose, refusal } = await openPurpose(deps, token);
  if (!purpose) return sendOutcome(res, refusal, true);
  if (!purpose.claims.methods.includes('passkey')) return sendOutcome(res, linkRefusal('unknown'), true);
  const options = await assertionOptions(deps.rp);
  await deps.sessions.set(found.id, 'challenge', options.challenge);
  sendJson(res, 200, options);
};

const passkeyAnswer: PageHandler = async (req, res, token, deps) => {
  const found = await sessionOf(req, res, token, deps);
  if (!found) return;
  const challenge = await deps.sessions.takeChallenge(found.id);
  const body = await readJson(req);
  const response = body?.response as AuthenticationResponseJSON | undefined;
  const { purpose, refusal } = await openPurpose(deps, token);
  if (!purpose) return sendOutcome(res, refusal, true);
  if (!challenge || !response || typeof response.id !== 'string')
    return sendOutcome(res, PASSKEY_FAILED, true);
  const { claims } = purpose;
  const credential = await deps.passkeys.get(claims.teamId, claims.approver, response.id);
  if (!credential) return sendOutcome(res, FOREIGN_PASSKEY, true);
  const counter = await checkAssertion(deps.rp, challenge, response, credential);
  if (counter === undefined) return sendOutcome(res, PASSKEY_FAILED, true);
  // A passkey a reset removed after it was read approves nothing; nor does a second answer with the same counter.
  const touched = await deps.passkeys.touch(claims.teamId, claims.approver, credential.id, counter);
  if (touched === 'gone') return sendOutcome(res, FOREIGN_PASSKEY, true);
  if (touched === 'replayed') return sendOutcome(res, PASSKEY_FAILED, true);
  // A request that moved on refuses the link as it is; the link is left for the page to say so again.
  const moved = movedOutcome(purpose, await deps.requests.get(claims.requestId));
  if (moved) return sendOutcome(res, moved, true);
  const standing = await standingOutcome(deps, purpose);
  if (standing) return sendOutcome(res, standing, true);
  // Uses the link up (once, atomically), then counts the approval or runs the break glass.
  const used = await deps.links.consume(token);
  if (used !== 'ok') return sendOutcome(res, linkRefusal(used), true);
  sendOutcome(
    res,
    await completeVerified(deps, purpose, { method: 'passkey', subject: credential.id }),
    true,
  );
};

/** `METHOD action` → handler, for /verify/<token>[/<action>]. */
export function approvalRoutes(): Record<string, PageHandler> {
  return {
    'GET ': show,
    'POST passkey-options': passkeyOptions,
    'POST passkey': passkeyAnswer,
    'POST sso': ssoStart('verify'),
  };
}
