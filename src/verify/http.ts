import type { IncomingMessage, ServerResponse } from 'node:http';
import { contentSecurityPolicy, messagePage } from './html.ts';
import { cookieOf, type PageSession, type PageSessions, setCookie } from './sessions.ts';

/**
 * The path PUBLIC_URL puts before the page's own (`/cloudops` of `https://intra.example/cloudops`; '' for none), as
 * the dispatcher learned it for this answer: the page's assets, its script's POSTs and its cookies' paths carry it,
 * since the browser sees the page there even when a proxy strips it before the bot.
 */
const roots = new WeakMap<ServerResponse, string>();

export function setPageRoot(res: ServerResponse, root: string): void {
  roots.set(res, root);
}

export function rootOf(res: ServerResponse): string {
  return roots.get(res) ?? '';
}

/* What every handler of the page needs of HTTP: answers with the page's headers, bodies read with a limit. */

/** A page's or a POST's answer shown to the person: a title and one line. */
export interface Outcome {
  title: string;
  text: string;
  tone: 'ok' | 'refused';
  status?: number;
}

/** The cookie of a page session (scoped to the link's path, so two links in one browser do not meet). */
export const SESSION_COOKIE = 'cloudops_page';

/** The page's response headers: the CSP, no caching, no sniffing, no referrer beyond this site (the URL holds the link). */
export function pageHeaders(type: string, formTargets: string[] = []): Record<string, string> {
  return {
    'content-type': type,
    'cache-control': 'no-store',
    'content-security-policy': contentSecurityPolicy(formTargets),
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'same-origin',
    'x-frame-options': 'DENY',
  };
}

export function sendHtml(
  res: ServerResponse,
  status: number,
  html: string,
  extra: Record<string, string | string[]> = {},
  formTargets: string[] = [],
): void {
  res.writeHead(status, { ...pageHeaders('text/html; charset=utf-8', formTargets), ...extra });
  res.end(html);
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  extra: Record<string, string | string[]> = {},
): void {
  res.writeHead(status, { ...pageHeaders('application/json'), ...extra });
  res.end(JSON.stringify(body));
}

/** An outcome as a whole page (GET) or as JSON for the page's script (POST). */
export function sendOutcome(res: ServerResponse, outcome: Outcome, asJson: boolean): void {
  const status = outcome.status ?? (outcome.tone === 'ok' ? 200 : 409);
  if (asJson) sendJson(res, status, { title: outcome.title, text: outcome.text, tone: outcome.tone });
  else sendHtml(res, status, messagePage(outcome.title, outcome.text, outcome.tone, rootOf(res)));
}

/** The body, at most 64 KiB (a WebAuthn answer is a few KiB); undefined when longer. */
export async function readBody(req: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > 65_536) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** A JSON object body; undefined when it is not one. */
export async function readJson(req: IncomingMessage): Promise<Record<string, unknown> | undefined> {
  const text = await readBody(req);
  try {
    const value: unknown = text === undefined ? undefined : JSON.parse(text);
    return value && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** Where the page's cookies go and how they are named: Secure and `__Host-` on https. */
export interface CookieScope {
  /** PUBLIC_URL is https. */
  secure: boolean;
}

/**
 * The session cookie's name for the link with key `link`. On https a `__Host-` cookie (Secure, Path=/, no Domain: a
 * sibling subdomain cannot plant or overwrite it), named per link so that two links in one browser do not meet; on
 * http (trials on localhost) the plain name, scoped to the link's path.
 */
export function sessionCookieName(link: string, scope: CookieScope): string {
  return scope.secure ? `__Host-cloudops_page_${link.slice(0, 16)}` : SESSION_COOKIE;
}

/** The session cookie for a page at `path`: Strict, since the page and its POSTs are same-site. */
export function sessionCookie(id: string, path: string, link: string, scope: CookieScope): string {
  return setCookie(sessionCookieName(link, scope), id, {
    path: scope.secure ? '/' : path,
    sameSite: 'Strict',
    secure: scope.secure,
    maxAgeS: 600,
  });
}

/** The page session's id the request carries for the link with key `link`. */
export function sessionIdOf(req: IncomingMessage, link: string, scope: CookieScope): string | undefined {
  return cookieOf(req, sessionCookieName(link, scope));
}

/** What the session checks need of the page's dependencies. */
export interface PageContext extends CookieScope {
  sessions: PageSessions;
  rp: { origin: string };
}

/** More page sessions on one link than a person opens: a flood, refused before it fills Redis. */
export const TOO_MANY_OPENS: Outcome = {
  title: 'Opened too often',
  text: 'This link was opened (or its SSO login started) more times than a person does. Nothing was counted. Ask for a new link in Slack.',
  tone: 'refused',
  status: 429,
};

export const SESSION_ENDED: Outcome = {
  title: 'Open the link again',
  text: 'This page’s session ended or was not started here (a POST without its page). Nothing was counted; open the link from Slack again.',
  tone: 'refused',
  status: 403,
};

/**
 * The page session of a POST: its cookie, the CSRF token (header or form field), and the Origin when the browser
 * sent one, all matching; undefined otherwise.
 */
export async function postSession(
  req: IncomingMessage,
  page: PageContext,
  link: string,
  csrf: string | undefined,
): Promise<{ id: string; session: PageSession } | undefined> {
  const { sessions, rp } = page;
  const sent = req.headers.origin;
  if (sent !== undefined && sent !== rp.origin) return undefined;
  const id = sessionIdOf(req, link, page);
  const session = await sessions.check(id, link, csrf);
  return id && session ? { id, session } : undefined;
}

/** The page session of a script's POST (its CSRF token in the X-CSRF-Token header); undefined after answering so. */
export async function scriptPostSession(
  req: IncomingMessage,
  res: ServerResponse,
  page: PageContext,
  link: string,
): Promise<{ id: string; session: PageSession } | undefined> {
  const csrf = req.headers['x-csrf-token'];
  const found = await postSession(req, page, link, typeof csrf === 'string' ? csrf : undefined);
  if (!found) sendOutcome(res, SESSION_ENDED, true);
  return found;
}
