import type { VerifyMethod } from '../config/verification-policy.ts';
import type { CloudRequest } from '../requests/model/types.ts';

/*
 * The page's HTML: small, server-rendered, no framework. Everything shown is escaped; the script and the style come
 * from this server (/verify-assets/), which the Content-Security-Policy allows and nothing else.
 */

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Text safe inside HTML elements and quoted attributes. */
export function esc(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

/** The Content-Security-Policy of every page: nothing but this server, no framing, forms only here and at the IdP. */
export function contentSecurityPolicy(formTargets: string[] = []): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "connect-src 'self'",
    "img-src 'self'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
    `form-action ${["'self'", ...formTargets].join(' ')}`,
  ].join('; ');
}

const FIELDS: Record<string, [string, string]> = {
  cores: ['Cores', ''],
  ramGb: ['RAM', ' GB'],
  osDiskGb: ['OS disk', ' GB'],
  cpuClass: ['CPU class', ''],
  wanMode: ['WAN', ''],
  privateNetwork: ['Private network', ''],
};

/** What the request does, in plain words: "shop-prod / VM 102 (db-1): Cores 4 → 6". */
export function plainSummary(request: CloudRequest): string {
  const vm = `${request.projectName} / VM ${request.vmid}${request.vmName ? ` (${request.vmName})` : ''}`;
  if (request.params.kind === 'restore') return `${vm}: restore from ${request.params.backupSlug}`;
  const { target, before } = request.params;
  const changes = Object.entries(target)
    .filter(([field, to]) => to !== undefined && before[field as keyof typeof before] !== to)
    .map(([field, to]) => {
      const [label, unit] = FIELDS[field] ?? [field, ''];
      const from = before[field as keyof typeof before];
      return `${label} ${from === undefined ? '?' : `${String(from)}${unit}`} → ${String(to)}${unit}`;
    });
  return `${vm}: ${changes.join(', ') || 'resize'}`;
}

const METHOD_WORDS: Record<VerifyMethod, string> = {
  passkey: 'a passkey registered to you',
  sso: 'a fresh login at your company SSO',
};

/** The page around `body`; `root` is PUBLIC_URL's path prefix (assets are served under it). */
function layout(title: string, body: string, data = '', root = ''): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${esc(title)} · cloudops</title>
<link rel="stylesheet" href="${esc(root)}/verify-assets/page.css">
</head><body><main id="main"${data}>
<h1>${esc(title)}</h1>
${body}
</main></body></html>
`;
}

/**
 * The page of an open approval link: what the request does and the buttons of the methods the rule allows. With
 * `breakGlass`, the page of a break-glass link: the same, saying what verifying does (runs the frozen work now) and
 * the reason typed in Slack.
 */
export function approvalPage(input: {
  request: CloudRequest;
  approver: string;
  methods: VerifyMethod[];
  base: string;
  csrf: string;
  ssoAvailable: boolean;
  /** PUBLIC_URL's path prefix ('' for none). */
  root: string;
  breakGlass?: { reason: string };
}): string {
  const { request, methods, base, csrf, breakGlass } = input;
  const passkey = methods.includes('passkey')
    ? '<p><button type="button" id="passkey">Verify with a passkey</button></p>'
    : '';
  const sso =
    methods.includes('sso') && input.ssoAvailable
      ? `<form method="post" action="${esc(base)}/sso"><input type="hidden" name="csrf" value="${esc(csrf)}"><p><button type="submit" id="sso">Log in with SSO</button></p></form>`
      : '';
  const intro = breakGlass
    ? `<p>Your break glass of request <strong>${esc(request.id)}</strong> runs it now, during the freeze, once you verify who you are.</p>`
    : `<p>Your approval of request <strong>${esc(request.id)}</strong> counts once you verify who you are.</p>`;
  const reason = breakGlass ? `\n<dt>Your reason</dt><dd class="reason">${esc(breakGlass.reason)}</dd>` : '';
  const body = `${intro}
<dl><dt>Request</dt><dd>${esc(request.id)}</dd><dt>What it does</dt><dd>${esc(plainSummary(request))}</dd>
<dt>Asked by</dt><dd>${esc(request.requester)}</dd>${reason}</dl>
<p>This rule accepts ${methods.map((m) => esc(METHOD_WORDS[m])).join(' or ')}.</p>
${passkey}${sso}
<p id="status" role="status" aria-live="polite"></p>
<p class="small">No passkey yet? Open cloudops in Slack, App Home, and choose Register a passkey.</p>
${scripts(input.root)}`;
  return layout(
    breakGlass ? 'Verify your break glass' : 'Verify your approval',
    body,
    ` data-mode="approve" data-base="${esc(base)}" data-csrf="${esc(csrf)}"`,
    input.root,
  );
}

/**
 * The page of an open registration link. `sso`: `needed` shows only the SSO login (where OIDC is configured, a
 * registration needs it first), `done` registers after it; `off` registers, after proving an existing passkey if any.
 */
export function registrationPage(input: {
  existing: number;
  base: string;
  csrf: string;
  sso: 'off' | 'needed' | 'done';
  /** PUBLIC_URL's path prefix ('' for none). */
  root: string;
}): string {
  const { existing, base, csrf, sso, root } = input;
  if (sso === 'needed') {
    const body = `<p>Registering a passkey needs a login at your company SSO first.</p>
<form method="post" action="${esc(base)}/sso"><input type="hidden" name="csrf" value="${esc(csrf)}"><p><button type="submit" id="sso">Log in with SSO</button></p></form>`;
    return layout('Register a passkey', body, '', root);
  }
  const proofNeeded = sso === 'off' && existing > 0;
  const intro =
    sso === 'done'
      ? '<p>You logged in with SSO. Register a passkey on this device.</p>'
      : existing === 0
        ? '<p>Register a passkey on this device. You will use it to verify approvals that ask for one.</p>'
        : `<p>You have ${existing} passkey${existing === 1 ? '' : 's'} already. To add another, first verify with one you have; without it an administrator can reset yours (cloudops passkeys reset).</p>`;
  const body = `${intro}
<p><button type="button" id="register">${proofNeeded ? 'Verify, then register' : 'Register a passkey'}</button></p>
<p id="status" role="status" aria-live="polite"></p>
${scripts(root)}`;
  return layout(
    'Register a passkey',
    body,
    ` data-mode="register" data-base="${esc(base)}" data-csrf="${esc(csrf)}" data-existing="${proofNeeded ? existing : 0}"`,
    root,
  );
}

/** After the SSO login for a registration: back to the registration page, by a link on this site. */
export function continuePage(href: string, root: string): string {
  return layout(
    'Logged in',
    `<p>You logged in with SSO as the person this link was sent to.</p><p><a id="continue" href="${esc(href)}">Continue to register a passkey</a></p>`,
    '',
    root,
  );
}

/** A page that says what happened (a result or a refusal) and nothing else. */
export function messagePage(title: string, text: string, tone: 'ok' | 'refused', root = ''): string {
  return layout(title, `<p class="${tone}" id="outcome" data-tone="${tone}">${esc(text)}</p>`, '', root);
}

/** The WebAuthn library and the page's script, from this server (under PUBLIC_URL's path prefix). */
function scripts(root: string): string {
  return `<script src="${esc(root)}/verify-assets/simplewebauthn-browser.js"></script>
<script src="${esc(root)}/verify-assets/page.js"></script>`;
}
