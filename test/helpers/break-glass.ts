import { expect } from 'vitest';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { CHANNELS, type Harness, USERS } from './harness.ts';
import { PageTab, SoftPasskey } from './soft-passkey.ts';
import {
  approveEphemeral,
  passkeyRegistrationLink,
  submitRequest,
  urlButtonOf,
} from './verified-approvals.ts';

/*
 * What the tests of a break glass under a `verify:` rule share (docs/approvals.md#break-glass-under-a-verify-rule): a
 * clock inside a freeze window, who may break glass, a request approved on the page and held by the freeze, and the
 * Slack steps from "Run now (break glass)" to the link the breaker alone gets.
 */

const HOUR = 3_600_000;
/** Where the tests' clock starts: an hour into the freeze. */
export const FREEZE_START = new Date('2026-11-25T09:00:00Z');
/** The person who breaks glass, and a second one allowed to. */
export const BREAKER = USERS.admin;
export const OTHER_BREAKER = USERS.lead2;

const wall = (date: Date) => date.toISOString().slice(0, 16);

/** A freeze window as a YAML flow map: from an hour before FREEZE_START to two days after it. */
export const FREEZE_WINDOW = `{ from: "${wall(new Date(FREEZE_START.getTime() - HOUR))}", to: "${wall(new Date(FREEZE_START.getTime() + 48 * HOUR))}", tz: UTC, reason: release week }`;

/** Each of `users`' first passkey, a software one registered from the App Home (trusted on first use: no SSO). */
export async function registerSoftPasskeys(
  h: Harness,
  publicUrl: string,
  users: string[],
): Promise<Record<string, SoftPasskey>> {
  const keys: Record<string, SoftPasskey> = {};
  for (const user of users) {
    const key = new SoftPasskey(publicUrl);
    const tab = await PageTab.open(await passkeyRegistrationLink(h, user));
    expect((await tab.register(key)).body.title).toBe('Passkey registered');
    keys[user] = key;
  }
  return keys;
}

/** A resize of VM 201 (staging) to `cores`, approved by the lead with `leadKey` on the page, held by the freeze. */
export async function frozenVerified(h: Harness, cores: number, leadKey: SoftPasskey): Promise<CloudRequest> {
  const created = await submitRequest(h, `resize shop-frozen 201 cores=${cores}`, CHANNELS.staging);
  const url = urlButtonOf((await approveEphemeral(h, created.id, USERS.lead, CHANNELS.staging)).blocks) ?? '';
  expect((await (await PageTab.open(url)).approve(leadKey)).body.title).toBe('Approved');
  return h.waitForRequest(created.id, (r) => r.state === 'frozen');
}

/** "Run now (break glass)" on `request` and its form submitted by `user` with `reason`, in `channel`. */
export async function submitBreakGlass(
  h: Harness,
  request: CloudRequest,
  reason: string,
  channel: string,
  user: string = BREAKER,
): Promise<void> {
  const views = h.slack.views.length;
  await h.click('break_glass', request.id, user, channel);
  const form = await h.openedView(views);
  const submitted = await h.submitView(form.view, { break_glass_reason: reason }, user);
  expect(submitted.json).toEqual({ response_action: 'clear' });
}

/** The break glass of `request` (staging) submitted by `user`: the link the bot answered them alone with. */
export async function breakGlassLink(
  h: Harness,
  publicUrl: string,
  request: CloudRequest,
  reason: string,
  user: string = BREAKER,
): Promise<string> {
  const seen = h.slack.ephemerals(CHANNELS.staging, user).length;
  await submitBreakGlass(h, request, reason, CHANNELS.staging, user);
  const message = await h.slack.waitFor(() => h.slack.ephemerals(CHANNELS.staging, user)[seen]);
  const url = urlButtonOf(message.blocks) ?? '';
  expect(url.startsWith(`${publicUrl}/verify/`)).toBe(true);
  return url;
}
