import type { AuthenticationResponseJSON } from '@simplewebauthn/server';
import type { VerifyClaims } from '../requests/model/verification.ts';
import { type PageHandler, requestMoved, type VerifyPageDeps } from './deps.ts';
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
import { CHANGED, decisionOutcome, FOREIGN_PASSKEY, linkRefusal, PASSKEY_FAILED } from './outcomes.ts';
import { assertionOptions, checkAssertion } from './passkeys.ts';
import { ssoStart } from './sso-page.ts';

/*
 * An approval link's page: GET shows the request and the methods its rule allows (reads the link, uses nothing up);
 * the passkey POSTs run the assertion, and only a passkey of the approver that verifies uses the link up and counts
 * the approval through the lifecycle.
 */

/** The open approval link of `token`, or the outcome saying why it cannot be used. */
async function openClaims(deps: VerifyPageDeps, token: string) {
  const state = await deps.links.peek(token);
  if (state.status !== 'open') return { refusal: linkRefusal(state.status) };
  if (state.purpose.kind !== 'approve') return { refusal: linkRefusal('unknown') };
  return { claims: state.purpose.claims };
}

const show: PageHandler = async (req, res, token, deps) => {
  const { claims, refusal } = await openClaims(deps, token);
  if (!claims) return sendOutcome(res, refusal, false);
  const request = await deps.requests.get(claims.requestId);
  const moved = requestMoved(request, claims.version);
  if (moved || !request) return sendOutcome(res, moved === 'gone' ? linkRefusal('unknown') : CHANGED, false);
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
  const { claims, refusal } = await openClaims(deps, token);
  if (!claims) return sendOutcome(res, refusal, true);
  if (!claims.methods.includes('passkey')) return sendOutcome(res, linkRefusal('unknown'), true);
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
  const { claims, refusal } = await openClaims(deps, token);
  if (!claims) return sendOutcome(res, refusal, true);
  if (!challenge || !response || typeof response.id !== 'string')
    return sendOutcome(res, PASSKEY_FAILED, true);
  const credential = await deps.passkeys.get(claims.teamId, claims.approver, response.id);
  if (!credential) return sendOutcome(res, FOREIGN_PASSKEY, true);
  const counter = await checkAssertion(deps.rp, challenge, response, credential);
  if (counter === undefined) return sendOutcome(res, PASSKEY_FAILED, true);
  // A passkey a reset removed after it was read approves nothing; nor does a second answer with the same counter.
  const touched = await deps.passkeys.touch(claims.teamId, claims.approver, credential.id, counter);
  if (touched === 'gone') return sendOutcome(res, FOREIGN_PASSKEY, true);
  if (touched === 'replayed') return sendOutcome(res, PASSKEY_FAILED, true);
  // A request that moved on refuses the link as it is; the link is left for the page to say so again.
  const moved = requestMoved(await deps.requests.get(claims.requestId), claims.version);
  if (moved) return sendOutcome(res, moved === 'gone' ? linkRefusal('unknown') : CHANGED, true);
  await complete(res, token, deps, claims, credential.id);
};

/** Uses the link up (once, atomically) and counts the approval verified by `method`/`subject`. */
async function complete(
  res: Parameters<PageHandler>[1],
  token: string,
  deps: VerifyPageDeps,
  claims: VerifyClaims,
  subject: string,
): Promise<void> {
  const used = await deps.links.consume(token);
  if (used !== 'ok') return sendOutcome(res, linkRefusal(used), true);
  const decision = await deps.approver.approveVerified(claims, { method: 'passkey', subject });
  sendOutcome(res, decisionOutcome(decision, claims.requestId), true);
}

/** `METHOD action` → handler, for /verify/<token>[/<action>]. */
export function approvalRoutes(): Record<string, PageHandler> {
  return {
    'GET ': show,
    'POST passkey-options': passkeyOptions,
    'POST passkey': passkeyAnswer,
    'POST sso': ssoStart('verify'),
  };
}
