import type { IncomingMessage, ServerResponse } from 'node:http';
import { contentSecurityPolicy, messagePage } from './html.ts';
import { cookieOf, type PageSession, type PageSessions, setCookie } from './sessions.ts';

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

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, pageHeaders('application/json'));
  res.end(JSON.stringify(body));
}

/** An outcome as a whole page (GET) or as JSON for the page's script (POST). */
export function sendOutcome(res: ServerResponse, outcome: Outcome, asJson: boolean): void {
  const status = outcome.status ?? (outcome.tone === 'ok' ? 200 : 409);
  if (asJson) sendJson(res, status, { title: outcome.title, text: outcome.text, tone: outcome.tone });
  else sendHtml(res, status, messagePage(outcome.title, outcome.text, outcome.tone));
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

/** The session cookie for a page at `path`: Strict, since the page and its POSTs are same-site. */
export function sessionCookie(id: string, path: string, secure: boolean): string {
  return setCookie(SESSION_COOKIE, id, { path, sameSite: 'Strict', secure, maxAgeS: 600 });
}

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
  sessions: PageSessions,
  link: string,
  origin: string,
  csrf: string | undefined,
): Promise<{ id: string; session: PageSession } | undefined> {
  const sent = req.headers.origin;
  if (sent !== undefined && sent !== origin) return undefined;
  const id = cookieOf(req, SESSION_COOKIE);
  const session = await sessions.check(id, link, csrf);
  return id && session ? { id, session } : undefined;
}

/** The page session of a script's POST (its CSRF token in the X-CSRF-Token header); undefined after answering so. */
export async function scriptPostSession(
  req: IncomingMessage,
  res: ServerResponse,
  sessions: PageSessions,
  link: string,
  origin: string,
): Promise<{ id: string; session: PageSession } | undefined> {
  const csrf = req.headers['x-csrf-token'];
  const found = await postSession(req, sessions, link, origin, typeof csrf === 'string' ? csrf : undefined);
  if (!found) sendOutcome(res, SESSION_ENDED, true);
  return found;
}
