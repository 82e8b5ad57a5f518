import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Provider } from 'oidc-provider';

/** One person the provider knows: they log in with `login` and `password`. */
export interface OidcAccount {
  login: string;
  password: string;
  /** The ID token's `sub` (default: the login). */
  sub?: string;
  email?: string;
  emailVerified?: boolean;
}

/** A real OpenID Provider (oidc-provider) a test started on loopback, with one confidential client. */
export interface TestOidcProvider {
  /** http://127.0.0.1:<port> */
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** How many logins succeeded (a password accepted on the login form). */
  logins(): number;
  /** The parameters of each authorization request that reached the login form, oldest first. */
  readonly asked: URLSearchParams[];
  /**
   * From now on a login says it happened `seconds` ago (its `auth_time`), as a provider that reused an earlier
   * authentication despite `max_age=0` would; 0 is now (the default).
   */
  setLoginAge(seconds: number): void;
  /**
   * From now on the provider answers a correct login with this OAuth error (and a description that repeats what was
   * typed), as a provider whose policy refuses the person would; undefined: logins succeed (the default).
   */
  setRefusal(error: string | undefined): void;
  /** From now on a login is of this class (the ID token's `acr`); undefined: the first `acr_values` asked, if any. */
  setAcr(acr: string | undefined): void;
  close(): Promise<void>;
}

export interface OidcProviderOptions {
  /** The client's only redirect URI (the flow's `${PUBLIC_URL}/auth/callback`). */
  redirectUri: string;
  accounts: OidcAccount[];
  /** Fixed client credentials and port (default: random, and any free port), to stand a provider up again. */
  clientId?: string;
  clientSecret?: string;
  port?: number;
}

const htmlText = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * Starts oidc-provider on 127.0.0.1 (port 0) with a login form of its own at `/interaction/<uid>`: a plain form that
 * posts `login` and `password`, so both a browser and an HTTP client with a cookie jar can log in. A login grants the
 * client `openid email` at once (no consent page), and the ID token carries `email` and `email_verified`.
 */
export async function startOidcProvider(options: OidcProviderOptions): Promise<TestOidcProvider> {
  const clientId = options.clientId ?? `cloudops-test-${randomBytes(4).toString('hex')}`;
  const clientSecret = options.clientSecret ?? randomBytes(24).toString('base64url');
  const byLogin = new Map(options.accounts.map((a) => [a.login, a]));
  const bySub = new Map(options.accounts.map((a) => [a.sub ?? a.login, a]));
  const asked: URLSearchParams[] = [];
  let logins = 0;
  let loginAge = 0;
  let acr: string | undefined;
  let refusal: string | undefined;

  let provider: Provider | undefined;
  const server = createServer((req, res) => {
    if (!provider) return void res.writeHead(503).end();
    if (req.url?.startsWith('/interaction/')) {
      interaction(provider, req, res).catch((error: unknown) => {
        if (!res.headersSent) res.writeHead(400, { 'content-type': 'text/plain' });
        res.end(error instanceof Error ? error.message : 'interaction failed');
      });
      return;
    }
    provider.callback()(req, res);
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const issuer = `http://127.0.0.1:${port}`;

  const key = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });
  provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: [options.redirectUri],
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    jwks: { keys: [{ ...key, kid: 'test', use: 'sig', alg: 'RS256' }] },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    claims: { openid: ['sub'], email: ['email', 'email_verified'] },
    // The email in the ID token itself, as the SSO login reads it (no userinfo call).
    conformIdTokenClaims: false,
    acrValues: ['pwd', 'mfa', 'phr'],
    features: { devInteractions: { enabled: false } },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    async findAccount(_ctx, sub) {
      const account = bySub.get(sub);
      if (!account) return undefined;
      return {
        accountId: sub,
        async claims() {
          return {
            sub,
            ...(account.email === undefined ? {} : { email: account.email }),
            ...(account.emailVerified === undefined ? {} : { email_verified: account.emailVerified }),
          };
        },
      };
    },
  });

  async function interaction(p: Provider, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const details = await p.interactionDetails(req, res);
    const uid = details.uid;
    if (req.method === 'GET') {
      asked.push(new URLSearchParams(details.params as Record<string, string>));
      return page(res, uid, '');
    }
    const form = new URLSearchParams(await bodyOf(req));
    const account = byLogin.get(form.get('login') ?? '');
    if (!account || account.password !== form.get('password'))
      return page(res, uid, 'Wrong login or password.');
    if (refusal !== undefined)
      return p.interactionFinished(
        req,
        res,
        { error: refusal, error_description: `refused for ${form.get('login')} (${form.get('password')})` },
        { mergeWithLastSubmission: false },
      );
    logins += 1;
    const accountId = account.sub ?? account.login;
    const grant = new p.Grant({ accountId, clientId });
    grant.addOIDCScope('openid email');
    grant.addOIDCClaims(['email', 'email_verified']);
    const grantId = await grant.save();
    const asks = typeof details.params.acr_values === 'string' ? details.params.acr_values : undefined;
    const loginAcr = acr ?? asks?.split(' ')[0];
    await p.interactionFinished(
      req,
      res,
      {
        login: {
          accountId,
          ts: Math.floor(Date.now() / 1000) - loginAge,
          ...(loginAcr === undefined ? {} : { acr: loginAcr }),
        },
        consent: { grantId },
      },
      { mergeWithLastSubmission: false },
    );
  }

  return {
    issuer,
    clientId,
    clientSecret,
    logins: () => logins,
    asked,
    setLoginAge(seconds) {
      loginAge = seconds;
    },
    setRefusal(error) {
      refusal = error;
    },
    setAcr(value) {
      acr = value;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function page(res: ServerResponse, uid: string, problem: string): void {
  res.writeHead(problem ? 401 : 200, {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
  });
  res.end(`<!doctype html>
<html><head><meta charset="utf-8"><title>Test provider: sign in</title></head>
<body><h1>Sign in</h1>${problem ? `<p role="alert">${htmlText(problem)}</p>` : ''}
<form method="post" action="/interaction/${htmlText(uid)}">
<label>Login <input name="login" autocomplete="username"></label>
<label>Password <input name="password" type="password" autocomplete="current-password"></label>
<button type="submit">Sign in</button>
</form></body></html>`);
}

async function bodyOf(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
