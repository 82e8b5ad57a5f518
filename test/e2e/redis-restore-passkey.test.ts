import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRedis, startLocalRedis } from '../../sim/local-redis.ts';
import { type Harness, PROD_UUID, startHarness, USERS } from '../helpers/harness.ts';
import { snapshotRedis } from '../helpers/redis.ts';
import {
  approveEphemeral,
  passkeyRegistrationLink,
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
  startForwarder,
} from '../helpers/verify-browser.ts';

// docs/operations.md#backing-up-and-restoring-redis with a passkey: registered (in Debian's chromium, a virtual
// authenticator) on Redis A, A snapshotted (BGSAVE, the RDB copied away) and gone, a new Redis B started from the
// copy alone, the bot restarted on it: the passkey still verifies the approval of a request that was waiting at the
// snapshot, and the cloud sim gets one POST. Both Redis servers are this file's own.

let a: LocalRedis;
let b: LocalRedis | undefined;
let h: Harness;
let forwarder: Forwarder;
let browser: Browser;
let device: Device;
let backup: string;
let publicUrl: string;

beforeAll(async () => {
  a = await startLocalRedis();
  backup = await mkdtemp(join(tmpdir(), 'cloudops-redis-backup-'));
  forwarder = await startForwarder();
  // WebAuthn refuses IP addresses; localhost is a secure context.
  publicUrl = `http://localhost:${forwarder.port}`;
  h = await startHarness({
    role: 'all',
    policyYaml: verifiedPolicyYaml({ approvals: { count: 1, verify: 'passkey' } }),
    env: () => ({ PUBLIC_URL: publicUrl, REDIS_URL: a.url }),
    redisTarget: { url: a.url, sentinelName: 'mymaster' },
  });
  forwarder.target(h.bot.port ?? 0);
  browser = await launchBrowser();
  device = await newDevice(browser);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await h?.close();
  await forwarder?.close();
  await b?.stop();
  await a?.stop();
  if (backup) await rm(backup, { recursive: true, force: true });
});

describe('restoring Redis from a snapshot, with passkeys', { timeout: 180_000 }, () => {
  it('a passkey registered before the snapshot verifies an approval on the restored Redis; the request runs once', async () => {
    expect(await registerOn(device, await passkeyRegistrationLink(h, USERS.lead))).toBe('Passkey registered');
    const created = await submitRequest(h, 'resize shop-prod 102 cores=6');
    expect(created.state).toBe('pending');

    await snapshotRedis(a.url);
    await copyFile(join(a.dir, 'dump.rdb'), join(backup, 'dump.rdb'));
    const port = a.port;
    await a.stop();
    b = await startLocalRedis({ port, extraArgs: ['--dir', backup, '--dbfilename', 'dump.rdb'] });
    await h.restart();
    forwarder.target(h.bot.port ?? 0);

    const url = urlButtonOf((await approveEphemeral(h, created.id, USERS.lead)).blocks) ?? '';
    expect(url.startsWith(`${publicUrl}/verify/`)).toBe(true);
    await device.page.goto(url);
    await device.page.click('#passkey');
    await device.page.waitForSelector('#outcome');
    expect(await device.page.textContent('h1')).toBe('Approved');
    const done = await h.waitForRequest(created.id, (r) => r.state === 'succeeded', 30_000);
    expect(done.approvals?.[0]?.verified?.method).toBe('passkey');
    expect(h.sim.applied.filter((x) => x.projectUuid === PROD_UUID && x.vmid === 102)).toHaveLength(1);
  });
});
