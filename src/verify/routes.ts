import { readFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { approvalRoutes } from './approve.ts';
import type { VerifyPageDeps } from './deps.ts';
import { pageHeaders, sendHtml, setPageRoot } from './http.ts';
import { registrationRoutes } from './register.ts';
import { ssoCallback } from './sso-page.ts';

/*
 * The verification page's routes, served by the web role on PORT: Bolt's server in HTTP mode (custom routes beside
 * /slack/events and health), the health server in Socket Mode. One dispatcher for both.
 */

const ASSET_TYPES: Record<string, string> = {
  'page.js': 'text/javascript; charset=utf-8',
  'page.css': 'text/css; charset=utf-8',
  'simplewebauthn-browser.js': 'text/javascript; charset=utf-8',
};

/** Where each asset is read from: the page's own beside this file; the WebAuthn bundle from its package. */
function assetPath(name: string): string {
  if (name === 'simplewebauthn-browser.js') {
    const entry = createRequire(import.meta.url).resolve('@simplewebauthn/browser');
    return join(dirname(dirname(entry)), 'dist', 'bundle', 'index.umd.min.js');
  }
  return join(dirname(new URL(import.meta.url).pathname), 'assets', name);
}

const assets = new Map<string, Promise<Buffer>>();

async function serveAsset(res: ServerResponse, name: string): Promise<void> {
  const type = ASSET_TYPES[name];
  if (!type) return notFound(res);
  let body = assets.get(name);
  if (!body) {
    body = readFile(assetPath(name));
    assets.set(name, body);
    body.catch(() => assets.delete(name));
  }
  res.writeHead(200, { ...pageHeaders(type), 'cache-control': 'public, max-age=3600' });
  res.end(await body);
}

const PAGE_PATH = /^\/(verify|passkeys)\/([^/]+)(?:\/([a-z-]+))?$/;
/** Every path the page owns, matched or not: an unknown one there gets the page's 404. */
const PAGE_AREA = /^\/(verify|passkeys|verify-assets)\/|^\/auth\/callback$/;

function notFound(res: ServerResponse): void {
  res.writeHead(404, pageHeaders('text/plain; charset=utf-8'));
  res.end('not found');
}

/**
 * Strict-Transport-Security of the page when PUBLIC_URL is https: a year, for this host alone (the company's other
 * hosts under the same domain are not the bot's to decide).
 */
export const HSTS = 'max-age=31536000';

/** The dispatcher: true when the path is the page's (answered), false to let the server answer 404. */
export function verifyPage(deps: VerifyPageDeps) {
  const approval = approvalRoutes();
  const registration = registrationRoutes();
  return (req: IncomingMessage, res: ServerResponse): boolean => {
    const url = (req.url ?? '/').split('?')[0] ?? '/';
    // PUBLIC_URL's path prefix: a proxy may strip it before the bot or pass it on; the page answers both ways.
    const path = deps.root && url.startsWith(`${deps.root}/`) ? url.slice(deps.root.length) : url;
    if (!PAGE_AREA.test(path)) return false;
    setPageRoot(res, deps.root);
    // Behind https, a browser that has seen the page once never opens it (and its session cookie) over plain http.
    if (deps.secure) res.setHeader('strict-transport-security', HSTS);
    let work: Promise<void> | undefined;
    if (path.startsWith('/verify-assets/') && req.method === 'GET')
      work = serveAsset(res, path.slice('/verify-assets/'.length));
    else if (path === '/auth/callback' && req.method === 'GET' && deps.sso)
      work = ssoCallback(req, res, deps);
    else {
      const [, area, token = '', action = ''] = PAGE_PATH.exec(path) ?? [];
      const table = area === 'verify' ? approval : registration;
      const handler = area ? table[`${req.method ?? 'GET'} ${action}`] : undefined;
      if (handler) work = handler(req, res, token, deps);
      else {
        // The page's own 404, with its headers, whichever server it runs on (the health server's is JSON, no CSP).
        notFound(res);
        return true;
      }
    }
    work.catch((error: unknown) => {
      // The URL holds the link token: only the area goes to the log.
      deps.logger.error({ err: error, area: path.split('/')[1] }, 'verification page: a request failed');
      if (!res.headersSent)
        sendHtml(
          res,
          500,
          '<!doctype html><title>Error</title><p>Something went wrong; nothing was counted.</p>',
        );
      else res.end();
    });
    return true;
  };
}

/** The page's paths as Bolt custom routes (HTTP mode); under PUBLIC_URL's path prefix (`root`) as well. */
export function verifyRoutes(handle: (req: IncomingMessage, res: ServerResponse) => boolean, root = '') {
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    if (!handle(req, res)) notFound(res);
  };
  const paths = [
    '/verify/:token',
    '/verify/:token/:action',
    '/passkeys/:token',
    '/passkeys/:token/:action',
    '/verify-assets/:file',
    '/auth/callback',
  ];
  return [...paths, ...(root ? paths.map((p) => `${root}${p}`) : [])].map((path) => ({
    path,
    method: ['GET', 'POST'],
    handler,
  }));
}
