import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadEnv, oidcRedirectUri } from '../../src/config/env.ts';
import { PolicyError, parsePolicy } from '../../src/config/policy.ts';
import { unmetVerify, unmetVerifyLine, verifyUses } from '../../src/config/verification-uses.ts';
import { planApproval, resizeFacts } from '../../src/requests/approval/approval-rules.ts';

function envFailure(raw: Record<string, string>): string {
  try {
    loadEnv(raw);
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
  throw new Error(`loadEnv accepted ${Object.keys(raw).join(', ')}`);
}

function policyFailure(text: string): string {
  try {
    parsePolicy(text, 'policy.yml');
  } catch (error) {
    if (error instanceof PolicyError) return error.message;
    throw error;
  }
  throw new Error('the policy was accepted');
}

const SSO = {
  PUBLIC_URL: 'https://cloudops.example.com',
  OIDC_ISSUER: 'https://login.example.com/realms/company',
  OIDC_CLIENT_ID: 'cloudops',
  OIDC_CLIENT_SECRET: 'oidc-secret-5c1e9a',
};

describe('the verification environment', () => {
  it('reads PUBLIC_URL (https, or http on this machine) without its trailing slash, and the redirect URI from it', () => {
    const env = loadEnv({ PUBLIC_URL: 'https://cloudops.example.com/ops/' });
    expect(env.PUBLIC_URL).toBe('https://cloudops.example.com/ops');
    expect(oidcRedirectUri(env)).toBe('https://cloudops.example.com/ops/auth/callback');
    for (const local of [
      'http://localhost:3000',
      'http://127.0.0.1:8080',
      'http://[::1]:3000',
      'http://cloudops.localhost',
    ])
      expect(loadEnv({ PUBLIC_URL: local }).PUBLIC_URL).toBe(local);
    expect(oidcRedirectUri(loadEnv({}))).toBeUndefined();
  });

  it('refuses a PUBLIC_URL over plain http elsewhere, with a query, or not a URL, naming the variable', () => {
    for (const bad of [
      'http://cloudops.example.com',
      'https://x.example.com/?a=1',
      'cloudops.example.com',
      'ftp://x',
    ])
      expect(envFailure({ PUBLIC_URL: bad })).toMatch(
        /^PUBLIC_URL: expected the https:\/\/ URL approvers open/,
      );
  });

  it('reads the SSO trio and OIDC_ACR_VALUES, and refuses one of the trio without the others, naming what is missing', () => {
    const env = loadEnv({ ...SSO, OIDC_ACR_VALUES: 'phr phrh' });
    expect(env).toMatchObject({ ...SSO, OIDC_ACR_VALUES: 'phr phrh' });
    expect(envFailure({ PUBLIC_URL: SSO.PUBLIC_URL, OIDC_ISSUER: SSO.OIDC_ISSUER })).toBe(
      'OIDC_ISSUER: set without OIDC_CLIENT_ID and OIDC_CLIENT_SECRET; the SSO login needs all three (docs/policy.md#verified-approvals)',
    );
    const { PUBLIC_URL: _p, ...noPublic } = SSO;
    expect(envFailure(noPublic)).toMatch(/^OIDC_ISSUER: set without PUBLIC_URL; /);
    expect(envFailure({ OIDC_ACR_VALUES: 'phr' })).toMatch(/^OIDC_ACR_VALUES: set without OIDC_ISSUER/);
    expect(envFailure({ ...SSO, OIDC_ISSUER: 'http://login.example.com' })).toMatch(
      /^OIDC_ISSUER: expected /,
    );
  });

  it('never echoes the client secret in an error', () => {
    const message = envFailure({ OIDC_CLIENT_SECRET: SSO.OIDC_CLIENT_SECRET });
    expect(message).toMatch(/^OIDC_CLIENT_SECRET: set without OIDC_ISSUER and OIDC_CLIENT_ID/);
    expect(message).not.toContain(SSO.OIDC_CLIENT_SECRET);
  });
});

const VERIFIED = `approvers: [U0ADMIN, U0LEAD, U0OPS]
approvals:
  count: 1
  verify: passkey
projects:
  - name: shop-prod
    uuid: 0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10
    channels: [C0PROD]
    approvals:
      count: 1
      rules:
        - { when: { kind: restore }, count: 2, verify: [sso, passkey] }
        - { when: { kind: resize_up, monthly_delta_under: 5 }, count: 0 }
        - { when: { kind: resize_down }, count: 1, verify: sso }
  - name: shop-dev
    uuid: 1b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10
    channels: [C0DEV]
agents:
  - name: deploy-agent
    token_sha256: ${'a'.repeat(64)}
    on_behalf_of: U0ADMIN
    projects: [shop-dev]
    verify: passkey
`;

describe('verify: in the policy', () => {
  it('reads verify on an approvals block, a rule and an agent, as lists in the page’s order', () => {
    const policy = parsePolicy(VERIFIED, 'policy.yml');
    expect(policy.approvals?.verify).toEqual(['passkey']);
    expect(policy.projects[0]?.approvals?.rules.map((r) => r.verify)).toEqual([
      ['passkey', 'sso'],
      undefined,
      ['sso'],
    ]);
    expect(policy.agents[0]?.verify).toEqual(['passkey']);
    expect(verifyUses(policy).map((u) => u.path.join('.'))).toEqual([
      'approvals.verify',
      'projects.0.approvals.rules.0.verify',
      'projects.0.approvals.rules.2.verify',
      'agents.0.verify',
    ]);
  });

  it('names the line and field of a bad method, and the closest key of a misspelt verify', () => {
    expect(policyFailure(VERIFIED.replace('verify: sso }', 'verify: sms }'))).toBe(
      'policy.yml:14: projects[0].approvals.rules[2].verify: expected passkey, sso or a list of both, not the text "sms"',
    );
    expect(policyFailure(VERIFIED.replace('  verify: passkey\nprojects', '  verfy: passkey\nprojects'))).toBe(
      'policy.yml:4: approvals.verfy: unknown key, did you mean `verify`?',
    );
    expect(policyFailure(VERIFIED.replace('    verify: passkey\n', '    verify: []\n'))).toBe(
      'policy.yml:23: agents[0].verify: expected at least 1 item',
    );
  });

  it('plans verification from the matching rule, else the block; never for a plan of no approval', () => {
    const policy = parsePolicy(VERIFIED, 'policy.yml');
    const approvals = policy.projects[0]?.approvals;
    if (!approvals) throw new Error('no approvals');
    const resize = (kind: 'resize_up' | 'resize_down', delta: string) =>
      resizeFacts(
        {
          kind: 'resize',
          target: { cores: 4 },
          steps: [],
          before: { vmid: 1, ha: false, cores: 2 },
          confirmedStopped: true,
        },
        kind,
        delta,
      );
    expect(planApproval(approvals, 'required', { kind: 'restore', changes: [] }, 'EUR')).toMatchObject({
      count: 2,
      verify: ['passkey', 'sso'],
    });
    expect(planApproval(approvals, 'required', resize('resize_down', '-3'), 'EUR').verify).toEqual(['sso']);
    expect(planApproval(approvals, 'required', resize('resize_up', '1'), 'EUR').verify).toBeUndefined();
    expect(planApproval(approvals, 'required', resize('resize_up', '50'), 'EUR').verify).toBeUndefined();
    const top = policy.approvals;
    if (!top) throw new Error('no default approvals');
    expect(planApproval(top, 'required', resize('resize_up', '50'), 'EUR')).toMatchObject({
      count: 1,
      rule: 'the default',
      verify: ['passkey'],
    });
    expect(planApproval(top, 'none', resize('resize_up', '50'), 'EUR').verify).toBeUndefined();
  });
});

describe('a verify: the environment cannot serve', () => {
  let dir: string;
  let file: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cloudops-verify-'));
    file = join(dir, 'policy.yml');
    await writeFile(file, VERIFIED);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('is one line naming the file, line and field of the rule and the variables it needs', async () => {
    const policy = parsePolicy(VERIFIED, file);
    expect(await unmetVerifyLine(loadEnv({}), policy, file)).toBe(
      `${file}:4: approvals.verify: passkey needs PUBLIC_URL (the passkey page), which is not set; set it or remove the verify (docs/policy.md#verified-approvals)`,
    );
    expect(await unmetVerifyLine(loadEnv({ PUBLIC_URL: SSO.PUBLIC_URL }), policy, file)).toBe(
      `${file}:12: projects[0].approvals.rules[0].verify: sso needs OIDC_ISSUER, OIDC_CLIENT_ID and OIDC_CLIENT_SECRET (the SSO login), which are not set; set them or remove the verify (docs/policy.md#verified-approvals)`,
    );
    expect(await unmetVerifyLine(loadEnv(SSO), policy, file)).toBeUndefined();
  });

  it('is nothing for a policy without verify, whatever the environment', () => {
    expect(unmetVerify(loadEnv({}), parsePolicy('approvers: [U0ADMIN]\n'))).toBeUndefined();
  });
});
