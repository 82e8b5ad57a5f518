import { expect } from 'vitest';
import type { EphemeralMessage } from '../../sim/slack/server.ts';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import {
  CHANNELS,
  type Harness,
  type HarnessOptions,
  POLICY_HEAD,
  PROD_UUID,
  PROD_VMS,
  STAGING_UUID,
  startHarness,
  USERS,
} from './harness.ts';
import { type OidcAccount, startOidcProvider, type TestOidcProvider } from './oidc-provider.ts';
import { clickOnHome, openHome } from './slack-events.ts';
import { type Forwarder, startForwarder, startStrippingProxy } from './verify-browser.ts';

/*
 * What the tests of verified approvals share: their policy (the default policy's head, shop-prod with web-1 and db-1,
 * approvals that ask a passkey or SSO), the whole bot behind the PUBLIC_URL the links point at, and the Slack steps
 * that lead to a link: a request, an Approve click, the App Home's "Register a passkey".
 */

export interface VerifiedPolicyOptions {
  /** shop-prod's approvers (default: the two leads and the admin). */
  approvers?: string[];
  /** shop-prod's `approvals` (written as JSON, which YAML reads): a count and what to verify, or rules saying it. */
  approvals: Record<string, unknown>;
  /** shop-prod's VMs after web-1 and db-1, as YAML flow maps. */
  moreVms?: string[];
  /**
   * A second project on VM 201 in the staging channel (STAGING_UUID), the lead its one approver, each approval
   * verified by a passkey (or what `verify` says, as YAML); `freeze` is a freeze window as a YAML flow map.
   */
  staging?: { name: string; freeze?: string; verify?: string };
  /** Top-level keys after the projects (e.g. `agents:`), as YAML. */
  more?: string;
}

export function verifiedPolicyYaml(options: VerifiedPolicyOptions): string {
  const approvers = options.approvers ?? [USERS.lead, USERS.lead2, USERS.admin];
  const moreVms = (options.moreVms ?? []).map((vm) => `\n      - ${vm}`).join('');
  const { staging } = options;
  const freeze = staging?.freeze ? `\n    freeze:\n      - ${staging.freeze}` : '';
  const stagingProject = staging
    ? `
  - name: ${staging.name}
    uuid: ${STAGING_UUID}
    cluster: zone-2
    channels: [${CHANNELS.staging}]
    approvers: [${USERS.lead}]
    approvals: { count: 1, verify: ${staging.verify ?? 'passkey'} }${freeze}
    vms:
      - { vmid: 201, name: staging-1, cores: 1, ram_gb: 2, os_disk_gb: 20, cpu_class: light, wan_mode: ipv6 }`
    : '';
  return `
${POLICY_HEAD}
projects:
  - name: shop-prod
    uuid: ${PROD_UUID}
    cluster: zone-1
    channels: [${CHANNELS.prod}]
    approvers: [${approvers.join(', ')}]
    approvals: ${JSON.stringify(options.approvals)}
    vms:
${PROD_VMS}${moreVms}${stagingProject}
${options.more ?? ''}`;
}

export interface VerifyPage {
  h: Harness;
  /** http://localhost:<port>: WebAuthn refuses IP addresses, and localhost is a secure context. */
  publicUrl: string;
  forwarder: Forwarder;
}

export interface VerifyPageOptions
  extends Pick<HarnessOptions, 'policyYaml' | 'now' | 'logLevel' | 'policyFile'> {
  /** The people of a real OpenID Provider the bot is configured for (OIDC_*); none: no SSO. */
  oidc?: OidcAccount[];
  /** PUBLIC_URL's path prefix (e.g. `/cloudops`), served by a proxy that strips it before the bot. */
  pathPrefix?: string;
}

/**
 * The whole bot (ROLE=all) behind a loopback forwarder that PUBLIC_URL names, so the page's links lead to it; with
 * `oidc`, a real OpenID Provider too, whose client redirects to the bot's /auth/callback. The caller closes the three
 * (what started of them: a start that fails closes the rest).
 */
export async function startVerifyPage(
  options: VerifyPageOptions & { oidc: OidcAccount[] },
): Promise<VerifyPage & { op: TestOidcProvider }>;
export async function startVerifyPage(options: VerifyPageOptions): Promise<VerifyPage>;
export async function startVerifyPage(
  options: VerifyPageOptions,
): Promise<VerifyPage & { op?: TestOidcProvider }> {
  const forwarder = options.pathPrefix
    ? await startStrippingProxy(options.pathPrefix)
    : await startForwarder();
  const publicUrl = `http://localhost:${forwarder.port}${options.pathPrefix ?? ''}`;
  let op: TestOidcProvider | undefined;
  try {
    if (options.oidc)
      op = await startOidcProvider({ redirectUri: `${publicUrl}/auth/callback`, accounts: options.oidc });
    const provider = op;
    const h = await startHarness({
      role: 'all',
      now: options.now ?? new Date(),
      policyYaml: options.policyYaml,
      logLevel: options.logLevel,
      policyFile: options.policyFile,
      env: () => ({
        PUBLIC_URL: publicUrl,
        ...(provider && {
          OIDC_ISSUER: provider.issuer,
          OIDC_CLIENT_ID: provider.clientId,
          OIDC_CLIENT_SECRET: provider.clientSecret,
        }),
      }),
    });
    forwarder.target(h.bot.port ?? 0);
    return { h, publicUrl, forwarder, op };
  } catch (error) {
    await op?.close();
    await forwarder.close();
    throw error;
  }
}

/** Submits the modal of `/cloud <text>` as the dev and waits for the request's message in `channel`. */
export async function submitRequest(
  h: Harness,
  text: string,
  channel: string = CHANNELS.prod,
): Promise<CloudRequest> {
  const ack = await h.fillAndSubmit(text, {}, USERS.dev, channel);
  expect(ack.json).toEqual({ response_action: 'clear' });
  const created = await h.nextRequest(channel);
  return h.waitForRequest(created.id, (r) => r.messageTs !== undefined);
}

/** The URL of the first link button in a message's blocks (the bot's links to the page are such buttons). */
export function urlButtonOf(blocks: unknown[] | undefined): string | undefined {
  type Block = { type: string; elements?: { type: string; url?: string }[] };
  return ((blocks ?? []) as Block[])
    .flatMap((b) => (b.type === 'actions' ? (b.elements ?? []) : []))
    .find((e) => e.type === 'button' && e.url)?.url;
}

/** Clicks Approve on request `id` as `user` and returns what the bot answered them alone (an ephemeral message). */
export async function approveEphemeral(
  h: Harness,
  id: string,
  user: string,
  channel: string = CHANNELS.prod,
): Promise<EphemeralMessage> {
  const seen = h.slack.ephemerals(channel, user).length;
  await h.click('approve', id, user, channel);
  return h.slack.waitFor(() => h.slack.ephemerals(channel, user)[seen]);
}

/** The registration link the bot DMs `user` after they click "Register a passkey" on the App Home. */
export async function passkeyRegistrationLink(h: Harness, user: string): Promise<string> {
  await openHome(h, user);
  await h.slack.waitFor(() => h.slack.homeOf(user));
  const seen = h.slack.messages(user).length;
  await clickOnHome(h, 'passkey_register', '', user);
  // The DM with the link's button: a "passkey registered" DM (queued, so it may come at any time) is not it.
  const dm = await h.slack.waitFor(() =>
    h.slack
      .messages(user)
      .slice(seen)
      .find((m) => urlButtonOf(m.blocks) !== undefined),
  );
  return urlButtonOf(dm.blocks) ?? '';
}
