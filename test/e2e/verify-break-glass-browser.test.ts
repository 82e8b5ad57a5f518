import type { Browser } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BREAKER, breakGlassLink, FREEZE_START, FREEZE_WINDOW } from '../helpers/break-glass.ts';
import { CHANNELS, type Harness, STAGING_UUID, USERS } from '../helpers/harness.ts';
import {
  approveEphemeral,
  passkeyRegistrationLink,
  startVerifyPage,
  submitRequest,
  urlButtonOf,
  verifiedPolicyYaml,
} from '../helpers/verified-approvals.ts';
import {
  type Device,
  type Forwarder,
  launchBrowser,
  newDevice,
  registerOn,
} from '../helpers/verify-browser.ts';

// A break glass under a `verify:` rule in a real browser (docs/approvals.md#break-glass-under-a-verify-rule):
// Debian's chromium with a virtual authenticator, through the whole bot with its real link store, the Slack stand-in
// and the cloud sim. The breaker's reason form answers with a link; the same page as an approval's, with the same
// assets, verifies the breaker's passkey and the frozen work runs.
const policyYaml = () =>
  verifiedPolicyYaml({
    approvals: { count: 1, verify: 'passkey' },
    staging: { name: 'shop-frozen', freeze: FREEZE_WINDOW },
    more: `break_glass: [${BREAKER}]\n`,
  });

let h: Harness;
let forwarder: Forwarder;
let browser: Browser;
let publicUrl: string;
const devices: Record<string, Device> = {};

beforeAll(async () => {
  ({ h, forwarder, publicUrl } = await startVerifyPage({ now: FREEZE_START, policyYaml }));
  browser = await launchBrowser();
  // The approver's and the breaker's passkeys, each registered from the App Home on their own device.
  for (const user of [USERS.lead, BREAKER]) {
    const device = await newDevice(browser);
    devices[user] = device;
    expect(await registerOn(device, await passkeyRegistrationLink(h, user))).toBe('Passkey registered');
  }
}, 120_000);

afterEach(() => {
  expect(h.slack.problems).toEqual([]);
});

afterAll(async () => {
  await browser?.close();
  await h?.close();
  await forwarder?.close();
});

/** Opens `url` on `user`'s device, clicks the passkey button and returns the outcome shown. */
async function verifyOn(user: string, url: string, check?: (device: Device) => Promise<void>) {
  const device = devices[user] as Device;
  await device.page.goto(url);
  await check?.(device);
  await device.page.click('#passkey');
  await device.page.waitForSelector('#outcome');
  return {
    title: (await device.page.textContent('h1')) ?? '',
    text: (await device.page.textContent('#outcome')) ?? '',
  };
}

describe('a verified break glass in a real browser', () => {
  it("the breaker's passkey on the page runs the frozen work once, the audit naming the credential", async () => {
    const created = await submitRequest(h, 'resize shop-frozen 201 cores=2', CHANNELS.staging);
    const approveUrl = urlButtonOf(
      (await approveEphemeral(h, created.id, USERS.lead, CHANNELS.staging)).blocks,
    );
    expect((await verifyOn(USERS.lead, approveUrl ?? '')).title).toBe('Approved');
    await h.waitForRequest(created.id, (r) => r.state === 'frozen');

    // Run now (break glass): the reason form, then the link, to the breaker alone.
    const reason = 'payment outage, fix cannot wait';
    const url = await breakGlassLink(h, publicUrl, created, reason);
    expect((await h.store.get(created.id))?.state).toBe('frozen');

    const outcome = await verifyOn(BREAKER, url, async (device) => {
      expect(await device.page.title()).toBe('Verify your break glass · cloudops');
      const main = (await device.page.textContent('main')) ?? '';
      expect(main).toContain(`Your break glass of request ${created.id}`);
      expect(main).toContain(reason);
      expect(main).toContain('Cores 1 → 2');
    });
    expect(outcome).toMatchObject({ title: 'Running now' });
    expect(outcome.text).toContain(`request ${created.id}`);

    const done = await h.waitForRequest(created.id, (r) => r.state === 'succeeded', 20_000);
    const [key] = await (devices[BREAKER] as Device).credentials();
    const credential = Buffer.from(key?.credentialId ?? '', 'base64').toString('base64url');
    expect(done.breakGlass).toMatchObject({
      by: BREAKER,
      reason,
      verified: { method: 'passkey', subject: credential },
    });
    expect(h.sim.applied.filter((a) => a.projectUuid === STAGING_UUID && a.vmid === 201)).toHaveLength(1);
    expect((await h.auditOf(created.id)).join('\n')).toContain(
      `break glass (verified: passkey, credential ${credential}): ${reason}`,
    );
    // The link again: used, nothing more runs.
    await (devices[BREAKER] as Device).page.goto(url);
    expect(await (devices[BREAKER] as Device).page.textContent('h1')).toBe('This link was used already');
    expect(h.sim.applied.filter((a) => a.projectUuid === STAGING_UUID && a.vmid === 201)).toHaveLength(1);
  });
});
