import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HSTS } from '../../src/verify/routes.ts';
import { type Harness, startHarness } from '../helpers/harness.ts';

// The verification page as the web role serves it, behind the PUBLIC_URL approvers open: https (a reverse proxy
// in front of the bot), or http on localhost for trials.
let secure: Harness;
let local: Harness;

beforeAll(async () => {
  [secure, local] = await Promise.all([
    startHarness({ role: 'web', env: () => ({ PUBLIC_URL: 'https://cloudops.example.com' }) }),
    startHarness({ role: 'web', env: () => ({ PUBLIC_URL: 'http://localhost:8443' }) }),
  ]);
});

afterAll(async () => {
  await Promise.all([secure?.close(), local?.close()]);
});

/** A link that does not exist (the page answers it), an asset, and a path outside the page. */
const paths = { link: `/verify/${'A'.repeat(43)}`, asset: '/verify-assets/page.css', outside: '/healthz' };

describe('Strict-Transport-Security on the verification page', () => {
  it('is sent on every answer of the page when PUBLIC_URL is https, and only there', async () => {
    expect(HSTS).toBe('max-age=31536000');
    for (const path of [paths.link, paths.asset]) {
      const answer = await fetch(`${secure.baseUrl}${path}`);
      await answer.arrayBuffer();
      expect(answer.headers.get('strict-transport-security'), path).toBe(HSTS);
      expect(answer.headers.get('content-security-policy'), path).not.toBeNull();
    }
    const health = await fetch(`${secure.baseUrl}${paths.outside}`);
    await health.arrayBuffer();
    expect(health.headers.get('strict-transport-security')).toBeNull();
  });

  it('is not sent when PUBLIC_URL is http on localhost (a browser ignores it there, and a trial has no TLS)', async () => {
    const answer = await fetch(`${local.baseUrl}${paths.link}`);
    await answer.arrayBuffer();
    expect(answer.status).toBeLessThan(500);
    expect(answer.headers.get('content-security-policy')).not.toBeNull();
    expect(answer.headers.get('strict-transport-security')).toBeNull();
  });
});
