import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, PROD_UUID, USERS } from '../helpers/harness.ts';
import {
  approveEphemeral,
  passkeyRegistrationLink,
  startVerifyPage,
  submitRequest,
  urlButtonOf,
  verifiedPolicyYaml,
} from '../helpers/verified-approvals.ts';
import { type Forwarder, launchBrowser, newDevice, registerOn } from '../helpers/verify-browser.ts';

// PUBLIC_URL with a path prefix behind a proxy that strips it (http://localhost:<port>/cloudops → the bot's /…):
// Debian's chromium registers a passkey and verifies an approval through the prefix alone, so the page's assets, its
// script's POSTs and its cookie must all carry the prefix.

const PREFIX = '/cloudops';

let h: Harness;
let forwarder: Forwarder;
let browser: Browser;
let publicUrl: string;

beforeAll(async () => {
  ({ h, forwarder, publicUrl } = await startVerifyPage({
    pathPrefix: PREFIX,
    policyYaml: () => verifiedPolicyYaml({ approvals: { count: 1, verify: 'passkey' } }),
  }));
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await h?.close();
  await forwarder?.close();
});

describe('the verification page under a path prefix', () => {
  it('registers a passkey and verifies an approval with only the prefixed paths reachable', async () => {
    const device = await newDevice(browser);
    const failed: string[] = [];
    device.page.on('response', (response) => {
      if (response.status() >= 400) failed.push(`${response.status()} ${new URL(response.url()).pathname}`);
    });
    const registration = await passkeyRegistrationLink(h, USERS.lead);
    expect(registration.startsWith(`${publicUrl}/passkeys/`)).toBe(true);
    expect(await registerOn(device, registration)).toBe('Passkey registered');
    const cookies = await device.context.cookies();
    expect(cookies.find((c) => c.name === 'cloudops_page')?.path).toBe(new URL(registration).pathname);

    const created = await submitRequest(h, 'resize shop-prod 101 cores=3');
    const link = urlButtonOf((await approveEphemeral(h, created.id, USERS.lead)).blocks) ?? '';
    expect(link.startsWith(`${publicUrl}/verify/`)).toBe(true);
    await device.page.goto(link);
    await device.page.click('#passkey');
    await device.page.waitForSelector('#outcome');
    expect(await device.page.textContent('h1')).toBe('Approved');
    // Every asset and POST went through the prefix: nothing the page asked for was refused.
    expect(failed).toEqual([]);
    await h.waitForRequest(created.id, (r) => r.state === 'succeeded', 30_000);
    expect(h.sim.applied.filter((a) => a.projectUuid === PROD_UUID && a.vmid === 101)).toHaveLength(1);
    await device.context.close();
  });
});
