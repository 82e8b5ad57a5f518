import type { AuthenticationResponseJSON, RegistrationResponseJSON } from '@simplewebauthn/server';
import type { PageHandler, VerifyPageDeps } from './deps.ts';
import { registrationPage } from './html.ts';
import {
  type Outcome,
  readJson,
  scriptPostSession,
  sendHtml,
  sendJson,
  sendOutcome,
  sessionCookie,
  sessionIdOf,
  TOO_MANY_OPENS,
} from './http.ts';
import { linkKey, tokenKey } from './links.ts';
import { FOREIGN_PASSKEY, linkRefusal, PASSKEY_FAILED } from './outcomes.ts';
import { assertionOptions, checkAssertion, checkRegistration, registrationOptions } from './passkeys.ts';
import { ssoStart } from './sso-page.ts';

/*
 * A registration link's page (App Home → "Register a passkey" → a DM with the link). A person's first passkey is
 * trusted on first use, announced to them by DM and audited; adding one when they have one needs an assertion with
 * an existing passkey on this page first, so a Slack session alone cannot add a passkey to someone who has one.
 */

/** Adding a passkey without proving an existing one. */
export const SECOND_REFUSED: Outcome = {
  title: 'Verify with your passkey first',
  text: 'You have a passkey already: another one can be added only after verifying with it here. A Slack session alone cannot add one. If you lost yours, an administrator can remove it (cloudops passkeys reset).',
  tone: 'refused',
  status: 403,
};

async function openFor(deps: VerifyPageDeps, token: string) {
  const state = await deps.links.peek(token);
  if (state.status !== 'open') return { refusal: linkRefusal(state.status) };
  if (state.purpose.kind !== 'register') return { refusal: linkRefusal('unknown') };
  return { who: { teamId: state.purpose.teamId, user: state.purpose.user } };
}

const show: PageHandler = async (req, res, token, deps) => {
  const { who, refusal } = await openFor(deps, token);
  if (!who) return sendOutcome(res, refusal, false);
  const base = `${deps.root}/passkeys/${token}`;
  const link = tokenKey(token);
  const session: { id: string; csrf: string; proven?: string } | undefined =
    (await deps.sessions.resume(sessionIdOf(req, link, deps), link)) ?? (await deps.sessions.open(link));
  if (!session) return sendOutcome(res, TOO_MANY_OPENS, false);
  const existing = await deps.passkeys.count(who.teamId, who.user);
  const sso = deps.sso ? (session.proven?.startsWith('sso:') ? 'done' : 'needed') : 'off';
  sendHtml(
    res,
    200,
    registrationPage({ existing, base, csrf: session.csrf, sso, root: deps.root }),
    { 'set-cookie': sessionCookie(session.id, base, link, deps) },
    deps.sso ? [deps.sso.issuerOrigin] : [],
  );
};

/**
 * Whether this page session may register: where SSO is configured, only after an SSO login as the person; otherwise
 * a first passkey freely, another only after proving one they have.
 */
function mayRegister(deps: VerifyPageDeps, existing: number, proven: string | undefined): boolean {
  if (deps.sso) return proven?.startsWith('sso:') === true;
  return existing === 0 || proven !== undefined;
}

/** Registering without the SSO login where it is configured. */
export const SSO_FIRST: Outcome = {
  title: 'Log in with SSO first',
  text: 'Registering a passkey needs a login at your company SSO first, as the person this link was sent to. A Slack session alone cannot register one.',
  tone: 'refused',
  status: 403,
};

/** The POST's session, link and person; undefined after answering why not. */
async function postContext(
  req: Parameters<PageHandler>[0],
  res: Parameters<PageHandler>[1],
  token: string,
  deps: VerifyPageDeps,
) {
  const found = await scriptPostSession(req, res, deps, tokenKey(token));
  if (!found) return undefined;
  const { who, refusal } = await openFor(deps, token);
  if (!who) return void sendOutcome(res, refusal, true);
  return { ...found, who };
}

const proofOptions: PageHandler = async (req, res, token, deps) => {
  const context = await postContext(req, res, token, deps);
  if (!context) return;
  const options = await assertionOptions(deps.rp);
  await deps.sessions.set(context.id, 'challenge', options.challenge);
  sendJson(res, 200, options);
};

const proof: PageHandler = async (req, res, token, deps) => {
  const context = await postContext(req, res, token, deps);
  if (!context) return;
  const challenge = await deps.sessions.takeChallenge(context.id);
  const response = (await readJson(req))?.response as AuthenticationResponseJSON | undefined;
  if (!challenge || !response || typeof response.id !== 'string')
    return sendOutcome(res, PASSKEY_FAILED, true);
  const { teamId, user } = context.who;
  const credential = await deps.passkeys.get(teamId, user, response.id);
  if (!credential) return sendOutcome(res, FOREIGN_PASSKEY, true);
  const counter = await checkAssertion(deps.rp, challenge, response, credential);
  if (counter === undefined) return sendOutcome(res, PASSKEY_FAILED, true);
  const touched = await deps.passkeys.touch(teamId, user, credential.id, counter);
  if (touched === 'gone') return sendOutcome(res, FOREIGN_PASSKEY, true);
  if (touched === 'replayed') return sendOutcome(res, PASSKEY_FAILED, true);
  // The proof goes to a new session (new cookie, new CSRF token): a session id planted in this browser before, which
  // its planter also holds, proves nothing.
  const link = tokenKey(token);
  const renewed = await deps.sessions.renew(context.id, link, credential.id);
  const cookie = sessionCookie(renewed.id, `${deps.root}/passkeys/${token}`, link, deps);
  sendJson(res, 200, { proven: true, csrf: renewed.csrf }, { 'set-cookie': cookie });
};

const options: PageHandler = async (req, res, token, deps) => {
  const context = await postContext(req, res, token, deps);
  if (!context) return;
  const { teamId, user } = context.who;
  const existing = await deps.passkeys.ids(teamId, user);
  if (!mayRegister(deps, existing.length, context.session.proven))
    return sendOutcome(res, deps.sso ? SSO_FIRST : SECOND_REFUSED, true);
  const created = await registrationOptions(deps.rp, teamId, user, existing);
  await deps.sessions.set(context.id, 'challenge', created.challenge);
  sendJson(res, 200, created);
};

/** The page's proof no longer holds: the passkey it proved was removed, or someone registered first meanwhile. */
export const PROOF_STALE: Outcome = {
  title: 'Verify again',
  text: 'What this page verified no longer holds: the passkey you verified with was removed (cloudops passkeys reset), or another passkey was registered for you meanwhile. Nothing was registered. Open a new link from the App Home.',
  tone: 'refused',
  status: 409,
};

/** The credential id is held already (another person's passkey, or one of yours). */
export const CREDENTIAL_TAKEN: Outcome = {
  title: 'Passkey already registered',
  text: 'A passkey with this credential id is registered already. Nothing was registered.',
  tone: 'refused',
  status: 409,
};

/** What the registration rests on, and how the audit says it. */
function proofOf(deps: VerifyPageDeps, existing: number, proven: string | undefined) {
  if (proven?.startsWith('sso:'))
    return { proof: { kind: 'sso' as const }, how: `after an SSO login, subject ${proven.slice(4)}` };
  if (deps.sso === undefined && existing === 0 && proven === undefined)
    return { proof: { kind: 'first' as const }, how: 'first passkey, trusted on first use' };
  return {
    proof: { kind: 'passkey' as const, id: proven ?? '' },
    how: `added after verifying with passkey ${proven}`,
  };
}

const register: PageHandler = async (req, res, token, deps) => {
  const context = await postContext(req, res, token, deps);
  if (!context) return;
  const { teamId, user } = context.who;
  const challenge = await deps.sessions.takeChallenge(context.id);
  const response = (await readJson(req))?.response as RegistrationResponseJSON | undefined;
  const existing = await deps.passkeys.count(teamId, user);
  if (!mayRegister(deps, existing, context.session.proven))
    return sendOutcome(res, deps.sso ? SSO_FIRST : SECOND_REFUSED, true);
  if (!challenge || !response) return sendOutcome(res, PASSKEY_FAILED, true);
  const credential = await checkRegistration(deps.rp, challenge, response);
  if (!credential) return sendOutcome(res, PASSKEY_FAILED, true);
  const { proof, how } = proofOf(deps, existing, context.session.proven);
  const added = await deps.passkeys.add({
    teamId,
    user,
    credential,
    link: linkKey(deps.prefix, token),
    proof,
    detail: `registered passkey ${credential.id} (${how})`,
  });
  if (added === 'proof_stale') return sendOutcome(res, PROOF_STALE, true);
  if (added === 'taken') return sendOutcome(res, CREDENTIAL_TAKEN, true);
  if (added !== 'ok') return sendOutcome(res, linkRefusal(added), true);
  // Queued, not sent from here: Slack's rate limits and outages delay the warning, never lose it, and the page tells
  // the truth (the passkey is stored) whatever Slack answers.
  await deps
    .notify(
      user,
      `A passkey was registered for you on the cloudops verification page (${existing === 0 ? 'your first' : 'an additional one'}). If this was not you, tell an administrator at once: they can remove it with cloudops passkeys reset.`,
      `passkey.${credential.id}`,
    )
    .catch((error: unknown) => {
      // Stored and audited already: the page still says so; the operator learns the warning was not queued.
      deps.logger.error({ err: error, user }, 'the "passkey registered" DM could not be queued');
    });
  sendOutcome(
    res,
    {
      title: 'Passkey registered',
      text: 'Your passkey is registered. Approvals that ask for a passkey can now be verified with it.',
      tone: 'ok',
    },
    true,
  );
};

/** `METHOD action` → handler, for /passkeys/<token>[/<action>]. */
export function registrationRoutes(): Record<string, PageHandler> {
  return {
    'GET ': show,
    'POST proof-options': proofOptions,
    'POST proof': proof,
    'POST register-options': options,
    'POST register': register,
    'POST sso': ssoStart('passkeys'),
  };
}
