import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CHANNELS, type Harness, PROD_UUID, TEAM, USERS } from '../helpers/harness.ts';
import { testRedisUrl } from '../helpers/redis.ts';
import { runProcess } from '../helpers/run-process.ts';
import {
  approveEphemeral,
  passkeyRegistrationLink,
  startVerifyPage,
  submitRequest,
  urlButtonOf,
  verifiedPolicyYaml,
} from '../helpers/verified-approvals.ts';
import { type Device, type Forwarder, launchBrowser, newDevice } from '../helpers/verify-browser.ts';

// The verification page in a real browser (issue 37): Debian's chromium with a virtual authenticator, through the
// whole bot (web, worker, scheduler) with its real link store, the Slack stand-in and the cloud sim. PUBLIC_URL is
// http://localhost:<port> (WebAuthn refuses IP addresses; localhost is a secure context), a loopback forwarder.
const PICTURES = process.env.UPDATE_PICTURES === '1';

const policyYaml = () =>
  verifiedPolicyYaml({
    approvals: {
      count: 1,
      rules: [
        { name: 'more cores', when: { kind: 'resize_up', change: 'cores' }, count: 1, verify: 'passkey' },
        { name: 'more RAM', when: { kind: 'resize_up', change: 'ram' }, count: 2, verify: 'passkey' },
      ],
    },
  });

let h: Harness;
let forwarder: Forwarder;
let browser: Browser;
let publicUrl: string;
const devices: Record<string, Device> = {};
/** Every link the bot sent in these tests: none may reach a log or a channel. */
const sent: string[] = [];

beforeAll(async () => {
  ({ h, forwarder, publicUrl } = await startVerifyPage({
    now: new Date('2026-11-25T09:00:00Z'),
    policyYaml,
  }));
  browser = await launchBrowser();
  for (const user of [USERS.lead, USERS.lead2]) devices[user] = await newDevice(browser);
  // The lead's passkey, registered from the App Home as a person does (the first one, trusted on first use).
  await registerFrom(devices[USERS.lead]!, USERS.lead);
  await registerFrom(devices[USERS.lead2]!, USERS.lead2);
}, 120_000);

afterEach(() => {
  // Every message and view the bot sent passed Slack's Block Kit checks.
  expect(h.slack.problems).toEqual([]);
});

afterAll(async () => {
  await browser?.close();
  await h?.close();
  await forwarder?.close();
});

/** The registration link the bot DMs `user` after they click "Register a passkey" on the App Home. */
async function registrationLink(user: string): Promise<string> {
  const url = await passkeyRegistrationLink(h, user);
  sent.push(url);
  return url;
}

/** Opens `url` on `device`, clicks the page's button and returns the outcome shown. */
async function runPage(
  device: Device,
  url: string,
  button: string,
): Promise<{ title: string; text: string }> {
  await device.page.goto(url);
  await device.page.click(button);
  await device.page.waitForSelector('#outcome');
  return outcomeOf(device);
}

async function outcomeOf(device: Device): Promise<{ title: string; text: string }> {
  return {
    title: (await device.page.textContent('h1')) ?? '',
    text: (await device.page.textContent('#outcome')) ?? '',
  };
}

async function registerFrom(device: Device, user: string): Promise<void> {
  const url = await registrationLink(user);
  expect(url.startsWith(`${publicUrl}/passkeys/`)).toBe(true);
  const outcome = await runPage(device, url, '#register');
  expect(outcome.title).toBe('Passkey registered');
}

const request = (text: string) => submitRequest(h, text);

/** Clicks Approve as `user`: the link the bot sent them alone. */
async function approveForLink(id: string, user: string): Promise<string> {
  const ephemeral = await approveEphemeral(h, id, user);
  const url = urlButtonOf(ephemeral.blocks) ?? '';
  expect(url.startsWith(`${publicUrl}/verify/`)).toBe(true);
  sent.push(url);
  return url;
}

const postsFor = (vmid: number) =>
  h.sim.applied.filter((a) => a.projectUuid === PROD_UUID && a.vmid === vmid).length;

describe('the verification page in a real browser', () => {
  it('a passkey registered from the App Home, then used: the approval counts and the cloud sim gets exactly one POST', async () => {
    // The first registration was announced to the person by DM and written to the audit.
    const dms = h.slack.messages(USERS.lead).map((m) => m.text ?? '');
    expect(dms.some((t) => t.startsWith('A passkey was registered for you'))).toBe(true);
    const [leadKey] = await devices[USERS.lead]!.credentials();
    const audit = await h.redis.xrange(`${h.prefix}:audit`, '-', '+');
    expect(JSON.stringify(audit)).toContain('first passkey, trusted on first use');

    const created = await request('resize shop-prod 102 cores=6');
    const url = await approveForLink(created.id, USERS.lead);
    // The same click without verification sends nothing.
    expect(await h.store.get(created.id)).toMatchObject({ state: 'pending', approvals: [] });
    expect(postsFor(102)).toBe(0);

    const device = devices[USERS.lead]!;
    const response = await device.page.goto(url);
    const headers = response?.headers() ?? {};
    // Every page carries the CSP, and its session cookie is HttpOnly, SameSite=Strict and scoped to the link.
    expect(headers['content-security-policy']).toContain("default-src 'none'");
    expect(headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(await response?.headerValue('set-cookie')).toMatch(
      /^cloudops_page=[A-Za-z0-9_-]{43}; Path=\/verify\/[A-Za-z0-9_-]{43}; Max-Age=600; HttpOnly; SameSite=Strict$/,
    );
    expect(await device.page.textContent('main')).toContain(created.id);
    expect(await device.page.textContent('main')).toContain('Cores 4 → 6');
    expect(await device.page.textContent('main')).toContain('a passkey registered to you');
    if (PICTURES) await device.page.screenshot({ path: 'docs/pictures/verify-methods.png', fullPage: true });
    // Opening the page (as a link scanner would) used nothing up.
    await device.page.reload();
    await device.page.click('#passkey');
    await device.page.waitForSelector('#outcome');
    const outcome = await outcomeOf(device);
    expect(outcome).toMatchObject({ title: 'Approved' });
    if (PICTURES) await device.page.screenshot({ path: 'docs/pictures/verify-approved.png', fullPage: true });

    const done = await h.waitForRequest(created.id, (r) => r.state === 'succeeded', 15_000);
    // The authenticator's credential id (base64) is the one the approval names (base64url).
    const credential = Buffer.from(leadKey?.credentialId ?? '', 'base64').toString('base64url');
    expect(done.approvals?.[0]?.verified).toEqual({ method: 'passkey', subject: credential });
    expect(postsFor(102)).toBe(1);
    expect((await h.auditOf(created.id)).join('\n')).toContain(`verified: passkey, credential ${credential}`);

    // The same link again: used, nothing more counts.
    await device.page.goto(url);
    expect(await outcomeOf(device)).toMatchObject({ title: 'This link was used already' });
    if (PICTURES) await device.page.screenshot({ path: 'docs/pictures/verify-refused.png', fullPage: true });
    expect(postsFor(102)).toBe(1);
  });

  it('another person completing the link (their own passkey) counts nothing, and the approver still can', async () => {
    const created = await request('resize shop-prod 101 cores=3');
    const url = await approveForLink(created.id, USERS.lead);
    const outcome = await runPage(devices[USERS.lead2]!, url, '#passkey');
    expect(outcome.title).toBe('Not your passkey');
    expect(outcome.text).toContain('Nothing was counted.');
    expect(await h.store.get(created.id)).toMatchObject({ state: 'pending', approvals: [] });
    expect(postsFor(101)).toBe(0);
    expect((await runPage(devices[USERS.lead]!, url, '#passkey')).title).toBe('Approved');
    await h.waitForRequest(created.id, (r) => r.state === 'succeeded', 15_000);
    expect(postsFor(101)).toBe(1);
  });

  it('a changed link (the request moved on) and an expired link count nothing', async () => {
    const changed = await request('resize shop-prod 102 cores=8');
    const url = await approveForLink(changed.id, USERS.lead);
    const device = devices[USERS.lead]!;
    await device.page.goto(url);
    // The requester cancels while the page is open: the request's revision moves.
    await h.click('cancel', changed.id, USERS.dev, CHANNELS.prod);
    await h.waitForRequest(changed.id, (r) => r.state !== 'pending');
    await device.page.click('#passkey');
    await device.page.waitForSelector('#outcome');
    expect((await outcomeOf(device)).title).toBe('The request changed');
    expect((await h.store.get(changed.id))?.approvals ?? []).toEqual([]);

    const expiring = await request('resize shop-prod 101 cores=4');
    const late = await approveForLink(expiring.id, USERS.lead);
    h.clock.advance(11 * 60_000);
    await device.page.goto(late);
    expect(await outcomeOf(device)).toMatchObject({ title: 'This link has expired' });
    expect(await h.store.get(expiring.id)).toMatchObject({ state: 'pending', approvals: [] });
  });

  it('N-of-M with one verified and one plain approver: the plain click counts nothing; both verified, it runs once', async () => {
    const before = postsFor(101);
    const created = await request('resize shop-prod 101 ram=16');
    expect(created).toMatchObject({ requiredApprovals: 2, verify: ['passkey'] });
    const leadUrl = await approveForLink(created.id, USERS.lead);
    const first = await runPage(devices[USERS.lead]!, leadUrl, '#passkey');
    expect(first.text).toContain('counted (1 of 2)');
    // The second approver's plain click: a link of their own, nothing counted, nothing sent.
    const lead2Url = await approveForLink(created.id, USERS.lead2);
    expect((await h.store.get(created.id))?.approvals).toHaveLength(1);
    expect(postsFor(101)).toBe(before);
    expect((await runPage(devices[USERS.lead2]!, lead2Url, '#passkey')).title).toBe('Approved');
    await h.waitForRequest(created.id, (r) => r.state === 'succeeded', 15_000);
    expect(postsFor(101)).toBe(before + 1);
  });

  it('a second registration from a Slack session alone is refused', async () => {
    // Someone with the lead's Slack session, on a device without the lead's passkey.
    const stranger = await newDevice(browser);
    const url = await registrationLink(USERS.lead);
    await stranger.page.goto(url);
    expect(await stranger.page.textContent('main')).toContain('You have 1 passkey already');
    // Skipping the proof: the page's own POST, as its script would send it.
    const answer = (await stranger.page.evaluate(`(async () => {
      const main = document.getElementById('main');
      const res = await fetch(main.dataset.base + '/register-options', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-csrf-token': main.dataset.csrf },
        body: '{}',
      });
      return { status: res.status, body: await res.json() };
    })()`)) as { status: number; body: { title?: string } };
    expect(answer).toMatchObject({ status: 403, body: { title: 'Verify with your passkey first' } });
    // Proving with a passkey of someone else is refused too.
    const other = await runPage(devices[USERS.lead2]!, url, '#register');
    expect(other.title).toBe('Not your passkey');
    expect(await h.redis.hlen(`${h.prefix}:passkeys:${TEAM}:${USERS.lead}`)).toBe(1);
    await stranger.context.close();
  });

  it('a POST without the page’s CSRF token counts nothing', async () => {
    const created = await request('resize shop-prod 102 cores=7');
    const url = await approveForLink(created.id, USERS.lead);
    const device = devices[USERS.lead]!;
    await device.page.goto(url);
    const status = await device.page.evaluate(async (link) => {
      const res = await fetch(`${new URL(link).pathname}/passkey-options`, { method: 'POST', body: '{}' });
      return res.status;
    }, url);
    expect(status).toBe(403);
  });

  it('the page fits 320 px wide', async () => {
    const created = await request('resize shop-prod 102 cores=12');
    const url = await approveForLink(created.id, USERS.lead);
    const narrow = await newDevice(browser, 320);
    await narrow.page.goto(url);
    const widths = (await narrow.page.evaluate(
      '({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth })',
    )) as { scroll: number; client: number };
    expect(widths.scroll).toBeLessThanOrEqual(widths.client);
    expect(widths.client).toBe(320);
    await narrow.context.close();
  });

  it('cloudops passkeys reset removes a person’s passkeys, audited; their next registration is a first one again', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cloudops-passkeys-'));
    try {
      const policyFile = join(dir, 'policy.yml');
      await writeFile(policyFile, policyYaml());
      const repo = fileURLToPath(new URL('../../', import.meta.url));
      const run = await runProcess(
        process.execPath,
        [join(repo, 'bin', 'cloudops.mjs'), 'passkeys', 'reset', USERS.lead2],
        {
          env: {
            PATH: process.env.PATH ?? '',
            HOME: process.env.HOME ?? '',
            POLICY_FILE: policyFile,
            REDIS_URL: testRedisUrl(),
            REDIS_PREFIX: h.prefix,
          },
        },
      );
      expect(run.stderr).toBe('');
      expect(run.stdout).toContain(`Removed 1 passkey of ${USERS.lead2} (audited)`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    expect(await h.redis.hlen(`${h.prefix}:passkeys:${TEAM}:${USERS.lead2}`)).toBe(0);
    const audit = JSON.stringify(await h.redis.xrange(`${h.prefix}:audit`, '-', '+'));
    expect(audit).toContain(`reset the passkeys of ${USERS.lead2} (1 removed)`);
    // A new device, trusted as a first passkey again.
    const fresh = await newDevice(browser);
    const url = await registrationLink(USERS.lead2);
    expect((await runPage(fresh, url, '#register')).title).toBe('Passkey registered');
    expect(await h.redis.hlen(`${h.prefix}:passkeys:${TEAM}:${USERS.lead2}`)).toBe(1);
    await fresh.context.close();
  });

  it('no link token reaches the bot’s logs or a channel message', () => {
    expect(sent.length).toBeGreaterThan(5);
    const logs = h.logs.join('\n');
    const channels = JSON.stringify(h.slack.messages(CHANNELS.prod));
    for (const url of sent) {
      const token = url.slice(url.lastIndexOf('/') + 1);
      expect(logs).not.toContain(token);
      expect(channels).not.toContain(token);
    }
  });
});
