import { request } from 'undici';

/**
 * An approver's browser, reduced to what a login at the test provider needs: it follows redirects one by one, keeps
 * cookies (by name: the provider's are all on one host), and posts the login form. One jar is one browser: a second
 * login with the same jar has the provider's session of the first.
 */
export class LoginBrowser {
  private readonly cookies = new Map<string, string>();

  /**
   * Opens `url` (the flow's authorization URL) and follows redirects; logs in with `credentials` when the provider
   * shows its form. Resolves with the URL the provider sent the browser back to once it starts with `redirectUri`.
   */
  async login(
    url: string,
    redirectUri: string,
    credentials: { login: string; password: string },
  ): Promise<URL> {
    let next = new URL(url);
    let form: URLSearchParams | undefined;
    for (let hop = 0; hop < 20; hop++) {
      if (next.href.startsWith(redirectUri)) return next;
      const answer = await request(next, {
        method: form ? 'POST' : 'GET',
        headers: {
          cookie: [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; '),
          ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
        },
        body: form?.toString(),
      });
      this.keep(answer.headers['set-cookie']);
      const body = await answer.body.text();
      form = undefined;
      const location = answer.headers.location;
      if (answer.statusCode >= 300 && answer.statusCode < 400 && typeof location === 'string') {
        next = new URL(location, next);
        continue;
      }
      const action = /<form method="post" action="([^"]+)"/.exec(body)?.[1];
      if (answer.statusCode === 200 && action) {
        next = new URL(
          action.replace(/&#(\d+);/g, (_m, c: string) => String.fromCharCode(Number(c))),
          next,
        );
        form = new URLSearchParams(credentials);
        continue;
      }
      throw new Error(
        `the provider answered HTTP ${answer.statusCode} at ${next.pathname}: ${body.slice(0, 300)}`,
      );
    }
    throw new Error('too many redirects');
  }

  private keep(header: string | string[] | undefined): void {
    for (const line of typeof header === 'string' ? [header] : (header ?? [])) {
      const [pair = ''] = line.split(';');
      const at = pair.indexOf('=');
      const name = pair.slice(0, at).trim();
      const value = pair.slice(at + 1).trim();
      if (value === '' || /expires=Thu, 01 Jan 1970/i.test(line)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }
}

/** What a page tab needs for its SSO form: its URL, session cookie and HTML (holding the CSRF token). */
interface SsoTab {
  url: string;
  sessionCookie: string;
  html: string;
}

/** Starts the SSO login from `tab`'s form (its cookie and CSRF token, its origin): the bot's answer. */
export async function startPageSso(tab: SsoTab) {
  const csrf = /name="csrf" value="([^"]+)"/.exec(tab.html)?.[1] ?? '';
  const answer = await request(`${tab.url}/sso`, {
    method: 'POST',
    headers: {
      cookie: tab.sessionCookie,
      origin: new URL(tab.url).origin,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams({ csrf }).toString(),
  });
  const body = await answer.body.text();
  const ssoCookie = String(answer.headers['set-cookie'] ?? '').split(';')[0] ?? '';
  return { status: answer.statusCode, location: answer.headers.location, body, ssoCookie };
}

/**
 * A whole SSO login from `tab` as `account` at the test provider, back to `callbackUrl` (PUBLIC_URL/auth/callback):
 * the callback's status and page, and the cookies it set. Throws when the start was not the redirect to the provider.
 */
export async function pageSsoLogin(
  tab: SsoTab,
  callbackUrl: string,
  account: { login: string; password: string },
) {
  const started = await startPageSso(tab);
  if (started.status !== 303)
    throw new Error(`the SSO login did not start: ${started.status} ${started.body.slice(0, 200)}`);
  const callback = await new LoginBrowser().login(String(started.location), callbackUrl, account);
  const answer = await request(callback, { headers: { cookie: started.ssoCookie } });
  const setCookie = answer.headers['set-cookie'];
  const cookies = typeof setCookie === 'string' ? [setCookie] : (setCookie ?? []);
  return { status: answer.statusCode, html: await answer.body.text(), cookies };
}
