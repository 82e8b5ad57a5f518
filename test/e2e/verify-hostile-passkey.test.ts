import { createHash, createPrivateKey, sign } from 'node:crypto';
import type { Browser } from 'playwright-core';
import { request as http } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANNELS, type Harness, PROD_UUID, USERS } from '../helpers/harness.ts';
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

// The passkey leg of the verification page attacked as a hostile user would. The lead registers a passkey from the
// App Home in Debian's chromium (CDP virtual authenticator); the test then takes that passkey's private key from the
// authenticator and signs WebAuthn answers itself, so it can send what no honest browser would: no user verification,
// another origin, a counter that goes backwards, a replayed or foreign answer, two tabs at once.

const policyYaml = () =>
  verifiedPolicyYaml({ approvers: [USERS.lead, USERS.lead2], approvals: { count: 1, verify: 'passkey' } });

/** The lead's passkey as the virtual authenticator holds it. */
interface Key {
  id: string;
  privateKey: string;
  userHandle: string;
}

let h: Harness;
let forwarder: Forwarder;
let browser: Browser;
let publicUrl: string;
let device: Device;
let key: Key;
/** The next signature counter a forged answer carries (counters only go up). */
let counter = 1000;

beforeAll(async () => {
  ({ h, forwarder, publicUrl } = await startVerifyPage({ policyYaml }));
  browser = await launchBrowser();
  device = await newDevice(browser);
  expect(await registerOn(device, await passkeyRegistrationLink(h, USERS.lead))).toBe('Passkey registered');
  const [held] = (await device.credentials()) as unknown as {
    credentialId: string;
    privateKey: string;
    userHandle: string;
  }[];
  if (!held) throw new Error('the authenticator holds no passkey');
  key = {
    id: Buffer.from(held.credentialId, 'base64').toString('base64url'),
    privateKey: held.privateKey,
    userHandle: Buffer.from(held.userHandle, 'base64').toString('base64url'),
  };
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await h?.close();
  await forwarder?.close();
});

const request = (text: string) => submitRequest(h, text);

async function linkFor(id: string, user: string): Promise<string> {
  return urlButtonOf((await approveEphemeral(h, id, user)).blocks) ?? '';
}

/** A tab on the page: its session cookie and CSRF token, and the challenge of its passkey options. */
async function openTab(url: string) {
  const page = await http(url);
  const html = await page.body.text();
  const cookie = String(page.headers['set-cookie'] ?? '').split(';')[0] ?? '';
  const csrf = /data-csrf="([^"]+)"/.exec(html)?.[1] ?? '';
  const headers = { cookie, 'x-csrf-token': csrf, origin: publicUrl, 'content-type': 'application/json' };
  const options = await http(`${url}/passkey-options`, { method: 'POST', headers, body: '{}' });
  const { challenge } = (await options.body.json()) as { challenge: string };
  return { url, headers, challenge };
}

/** A WebAuthn assertion signed with the lead's passkey; `tamper` changes what an honest authenticator would send. */
function assertion(
  challenge: string,
  tamper: { flags?: number; origin?: string; rpId?: string; counter?: number; type?: string } = {},
) {
  const rpId = tamper.rpId ?? 'localhost';
  const flags = tamper.flags ?? 0x05; // user present + user verified
  const count = tamper.counter ?? ++counter;
  const authData = Buffer.concat([
    createHash('sha256').update(rpId).digest(),
    Buffer.from([flags]),
    Buffer.from([(count >>> 24) & 255, (count >>> 16) & 255, (count >>> 8) & 255, count & 255]),
  ]);
  const clientData = Buffer.from(
    JSON.stringify({
      type: tamper.type ?? 'webauthn.get',
      challenge,
      origin: tamper.origin ?? publicUrl,
      crossOrigin: false,
    }),
  );
  const privateKey = createPrivateKey({
    key: Buffer.from(key.privateKey, 'base64'),
    format: 'der',
    type: 'pkcs8',
  });
  // Chromium's authenticator takes the first algorithm offered that it knows (ML-DSA, Ed25519: no digest; ES256).
  const signature = sign(
    ['ec', 'rsa'].includes(privateKey.asymmetricKeyType ?? '') ? 'sha256' : null,
    Buffer.concat([authData, createHash('sha256').update(clientData).digest()]),
    privateKey,
  );
  return {
    id: key.id,
    rawId: key.id,
    type: 'public-key',
    clientExtensionResults: {},
    response: {
      clientDataJSON: clientData.toString('base64url'),
      authenticatorData: authData.toString('base64url'),
      signature: signature.toString('base64url'),
      userHandle: key.userHandle,
    },
  };
}

/** POSTs an answer from `tab`; the page's status and title. */
async function answer(tab: Awaited<ReturnType<typeof openTab>>, response: unknown) {
  const sent = await http(`${tab.url}/passkey`, {
    method: 'POST',
    headers: tab.headers,
    body: JSON.stringify({ response }),
  });
  const body = (await sent.body.json()) as { title: string };
  return { status: sent.statusCode, title: body.title };
}

const postsFor = (vmid: number) =>
  h.sim.applied.filter((a) => a.projectUuid === PROD_UUID && a.vmid === vmid).length;

describe('the passkey leg of the page under attack', () => {
  it('answers an honest authenticator would not send count nothing and leave the link working', async () => {
    const created = await request('resize shop-prod 101 cores=3');
    const url = await linkFor(created.id, USERS.lead);
    const attacks = [
      { name: 'no user verification', tamper: { flags: 0x01 } },
      { name: 'another origin', tamper: { origin: 'https://evil.example' } },
      { name: 'another rpID', tamper: { rpId: 'evil.example' } },
      { name: 'a registration answer type', tamper: { type: 'webauthn.create' } },
    ];
    for (const attack of attacks) {
      const tab = await openTab(url);
      const outcome = await answer(tab, assertion(tab.challenge, attack.tamper));
      expect({ attack: attack.name, ...outcome }).toEqual({
        attack: attack.name,
        status: 403,
        title: 'The passkey did not verify',
      });
    }
    // A challenge of another tab (another session) does not verify either.
    const mine = await openTab(url);
    const other = await openTab(url);
    expect((await answer(mine, assertion(other.challenge))).title).toBe('The passkey did not verify');
    expect(await h.store.get(created.id)).toMatchObject({ state: 'pending', approvals: [] });
    // The honest answer still counts: none of the attacks used the link up.
    const tab = await openTab(url);
    expect((await answer(tab, assertion(tab.challenge))).title).toBe('Approved');
  });

  it('a signature counter that goes backwards (a cloned passkey) counts nothing', async () => {
    const created = await request('resize shop-prod 102 cores=6');
    const url = await linkFor(created.id, USERS.lead);
    const tab = await openTab(url);
    const outcome = await answer(tab, assertion(tab.challenge, { counter: counter - 10 }));
    expect(outcome).toEqual({ status: 403, title: 'The passkey did not verify' });
    expect((await h.store.get(created.id))?.approvals).toEqual([]);
  });

  it('a replayed answer (same challenge, or on another link) and a completed link count nothing', async () => {
    const created = await request('resize shop-prod 101 cores=4');
    const url = await linkFor(created.id, USERS.lead);
    const tab = await openTab(url);
    const signed = assertion(tab.challenge);
    expect((await answer(tab, signed)).title).toBe('Approved');
    // The completed link: the same answer again, and a fresh session on it.
    expect(await answer(tab, signed)).toEqual({ status: 410, title: 'This link was used already' });
    const again = await http(url);
    expect(again.statusCode).toBe(410);
    await again.body.dump();
    // The answer for request A replayed on a link for request B.
    const other = await request('resize shop-prod 102 cores=7');
    const otherUrl = await linkFor(other.id, USERS.lead);
    const otherTab = await openTab(otherUrl);
    expect((await answer(otherTab, signed)).title).toBe('The passkey did not verify');
    expect((await h.store.get(other.id))?.approvals).toEqual([]);
  });

  it('the lead’s passkey on another approver’s link is not theirs', async () => {
    const created = await request('resize shop-prod 102 cores=8');
    const url = await linkFor(created.id, USERS.lead2);
    const tab = await openTab(url);
    expect(await answer(tab, assertion(tab.challenge))).toEqual({ status: 403, title: 'Not your passkey' });
    expect((await h.store.get(created.id))?.approvals).toEqual([]);
  });

  it('the request changes between page load and the answer: nothing counts', async () => {
    const created = await request('resize shop-prod 101 cores=5');
    const url = await linkFor(created.id, USERS.lead);
    const tab = await openTab(url);
    await h.click('cancel', created.id, USERS.dev, CHANNELS.prod);
    await h.waitForRequest(created.id, (r) => r.state === 'cancelled');
    const outcome = await answer(tab, assertion(tab.challenge));
    expect(outcome.title).toBe('The request changed');
    expect((await h.store.get(created.id))?.approvals).toEqual([]);
  });

  it('two tabs racing the same link with valid answers: exactly one counts, one POST to the cloud', async () => {
    const created = await request('resize shop-prod 101 cores=6');
    const url = await linkFor(created.id, USERS.lead);
    const tabs = await Promise.all([openTab(url), openTab(url), openTab(url)]);
    const signed = tabs.map((tab) => assertion(tab.challenge));
    const before = postsFor(101);
    const outcomes = await Promise.all(tabs.map((tab, i) => answer(tab, signed[i])));
    expect(outcomes.filter((o) => o.title === 'Approved')).toHaveLength(1);
    expect(outcomes.filter((o) => o.status === 200)).toHaveLength(1);
    await h.waitForRequest(created.id, (r) => r.state === 'succeeded', 15_000);
    expect((await h.store.get(created.id))?.approvals).toHaveLength(1);
    expect(postsFor(101) - before).toBe(1);
  });
});
