import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../sim/local-redis.ts';
import type { SlackStandIn } from '../../sim/slack/server.ts';
import { type DoctorWorld, MANIFEST_SCOPES, one, startDoctorWorld } from '../helpers/doctor.ts';
import { startOidcProvider } from '../helpers/oidc-provider.ts';

// `cloudops doctor`'s checks of verified approvals, as an operator runs it: the shipped binary in a child process
// (dist/, built by the global setup), against the cloud simulator, the Slack stand-in, a Redis server of this file's
// own, and a real OpenID Provider (oidc-provider) or a small server standing for a provider's discovery document.
const OIDC_SECRET = 'oidc-doctor-secret-6b0f';

let world: DoctorWorld;
let slack: SlackStandIn;
let dir: string;

const doctor = (args: string[], overrides?: Record<string, string>) => world.doctor(args, overrides);
const checks = (overrides?: Record<string, string>) => world.checks(overrides);

beforeAll(async () => {
  world = await startDoctorWorld('cloudops-doctor-verify-', [OIDC_SECRET]);
  ({ slack, dir } = world);
});

afterAll(async () => {
  await world?.close();
});

describe('cloudops doctor: verified approvals', () => {
  let web: Server;
  let base: string;
  /** What the stand-in of the web role and the SSO provider answers; the tests change it. */
  let discovery: Record<string, unknown> | undefined;
  let verifyEnv: Record<string, string>;

  beforeAll(async () => {
    // One small server stands for both what PUBLIC_URL leads to (the web role's /healthz) and the provider's
    // discovery document (a real provider's is only JSON at that path).
    web = createServer((req, res) => {
      if (req.url === '/healthz') return void res.writeHead(200).end('ok');
      if (req.url === '/realms/co/.well-known/openid-configuration' && discovery)
        return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(discovery));
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve));
    const address = web.address();
    base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    const policy = join(dir, 'verify-policy.yml');
    await writeFile(
      policy,
      `approvers: [U0ADMIN, S0OPS]
approvals:
  count: 1
  rules:
    - { when: { kind: restore }, count: 1, verify: [passkey, sso] }
projects:
  - name: shop-prod
    uuid: 0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10
    channels: [C0PROD]
`,
    );
    verifyEnv = {
      POLICY_FILE: policy,
      PUBLIC_URL: base,
      OIDC_ISSUER: `${base}/realms/co`,
      OIDC_CLIENT_ID: 'cloudops',
      OIDC_CLIENT_SECRET: OIDC_SECRET,
    };
  });
  afterAll(async () => {
    await new Promise((resolve) => web?.close(resolve));
  });

  const good = () => ({
    issuer: `${base}/realms/co`,
    authorization_endpoint: `${base}/realms/co/auth`,
    token_endpoint: `${base}/realms/co/token`,
    jwks_uri: `${base}/realms/co/jwks`,
    code_challenge_methods_supported: ['plain', 'S256'],
  });

  it('all there: the environment the policy needs, PUBLIC_URL answering, the discovery document, approvers’ emails', async () => {
    discovery = good();
    const run = await doctor([], verifyEnv);
    expect(run.stdout).not.toContain(OIDC_SECRET);
    expect(run.code, run.stdout).toBe(0);
    for (const part of [
      /^✓ verified approvals: the policy asks for passkey and sso, and the environment has what they need$/m,
      new RegExp(`^✓ PUBLIC_URL answers: ${base}/healthz is the web role$`, 'm'),
      new RegExp(`^✓ the SSO provider's discovery document fits: issuer ${base}/realms/co$`, 'm'),
      /^✓ Slack gives approvers' emails \(users\.info of U0ADMIN\)$/m,
    ])
      expect(run.stdout).toMatch(part);
  });

  it('against a real provider: its discovery document fits, and it accepts the client id and secret, or refuses them', async () => {
    const op = await startOidcProvider({ redirectUri: `${base}/auth/callback`, accounts: [] });
    try {
      const real = { ...verifyEnv, OIDC_ISSUER: op.issuer, OIDC_CLIENT_ID: op.clientId };
      const run = await doctor([], { ...real, OIDC_CLIENT_SECRET: op.clientSecret, OIDC_ACR_VALUES: 'phr' });
      expect(run.stdout).not.toContain(op.clientSecret);
      expect(run.code, run.stdout).toBe(0);
      expect(run.stdout).toContain(`✓ the SSO provider's discovery document fits: issuer ${op.issuer}`);
      expect(run.stdout).toContain(`✓ the SSO provider accepts OIDC_CLIENT_ID ${op.clientId} and its secret`);

      const wrong = await checks({ ...real, OIDC_CLIENT_SECRET: OIDC_SECRET });
      expect(wrong.code).toBe(1);
      expect(one(wrong.checks, 'verify.oidc-client')).toMatchObject({
        status: 'fail',
        summary: `the SSO provider refuses OIDC_CLIENT_ID ${op.clientId} with its secret (HTTP 401, invalid_client)`,
        fix: expect.stringContaining('OIDC_CLIENT_SECRET'),
      });
    } finally {
      await op.close();
    }
  });

  it('a wrong issuer, no PKCE, a PUBLIC_URL that does not answer, no email scope, a missing variable: ✗ each with the fix', async () => {
    discovery = { ...good(), issuer: 'https://elsewhere.example.com' };
    const port = await freePort();
    const wrong = await checks({
      ...verifyEnv,
      PUBLIC_URL: `http://127.0.0.1:${port}`,
      OIDC_ISSUER: `${base}/realms/co`,
    });
    expect(wrong.code).toBe(1);
    expect(one(wrong.checks, 'verify.oidc-discovery')).toMatchObject({
      status: 'fail',
      summary: `the discovery document names the issuer https://elsewhere.example.com, not OIDC_ISSUER ${base}/realms/co`,
    });
    expect(one(wrong.checks, 'verify.public-url')).toMatchObject({
      status: 'fail',
      summary: expect.stringMatching(/^PUBLIC_URL does not answer from here \(ECONNREFUSED at /),
    });

    discovery = { ...good(), code_challenge_methods_supported: ['plain'] };
    expect(one((await checks(verifyEnv)).checks, 'verify.oidc-discovery').summary).toMatch(/PKCE with S256/);
    discovery = undefined;
    expect(one((await checks(verifyEnv)).checks, 'verify.oidc-discovery').summary).toMatch(
      /^the SSO provider has no discovery document: HTTP 404 at /,
    );

    slack.grantScopes(MANIFEST_SCOPES.filter((scope) => scope !== 'users:read.email'));
    try {
      const noEmail = await checks(verifyEnv);
      expect(one(noEmail.checks, 'verify.slack-email')).toMatchObject({
        status: 'fail',
        summary: "verify: sso compares the approver's Slack email, and the token lacks users:read.email",
      });
      // Elsewhere the scope is optional: a warning, not a failure.
      expect(one(noEmail.checks, 'slack.scopes').status).toBe('warn');
    } finally {
      slack.grantScopes([...MANIFEST_SCOPES, 'channels:read', 'groups:read']);
    }

    discovery = { ...good(), token_endpoint_auth_methods_supported: ['private_key_jwt'] };
    expect(one((await checks(verifyEnv)).checks, 'verify.oidc-discovery')).toMatchObject({
      status: 'fail',
      summary: 'the SSO provider takes no client secret at its token endpoint (it offers private_key_jwt)',
    });
    discovery = { ...good(), acr_values_supported: ['mfa'] };
    expect(
      one((await checks({ ...verifyEnv, OIDC_ACR_VALUES: 'phr' })).checks, 'verify.oidc-discovery'),
    ).toMatchObject({
      status: 'fail',
      summary: 'OIDC_ACR_VALUES asks for phr, and the SSO provider offers mfa',
    });
    // Google's way: the claims listed, and auth_time not among them.
    discovery = { ...good(), claims_supported: ['sub', 'email', 'email_verified'] };
    expect(one((await checks(verifyEnv)).checks, 'verify.oidc-discovery')).toMatchObject({
      status: 'warn',
      summary: expect.stringMatching(/^the SSO provider does not list auth_time among its claims/),
    });

    const { OIDC_ISSUER: _i, OIDC_CLIENT_ID: _c, OIDC_CLIENT_SECRET: _s, ...noSso } = verifyEnv;
    const unmet = await checks(noSso);
    expect(one(unmet.checks, 'verify.environment')).toMatchObject({
      status: 'fail',
      summary:
        'verified approvals: approvals.rules[0].verify: sso needs OIDC_ISSUER, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, which are not set',
    });
  });
});
