import { describe, expect, it } from 'vitest';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { approvalPage, contentSecurityPolicy, esc, messagePage } from '../../src/verify/html.ts';
import { sessionCookie } from '../../src/verify/http.ts';
import { setCookie } from '../../src/verify/sessions.ts';
import { resizeRequest } from '../fixtures/requests.ts';

// The page's headers and markup that the browser tests (http://localhost) cannot show: Secure cookies on https,
// and escaping of whatever a request carries.
describe('the verification page', () => {
  it('its session cookie is HttpOnly, SameSite=Strict, scoped to the link; on https Secure and __Host- (Path=/)', () => {
    const link = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';
    expect(sessionCookie('abc', '/verify/tok', link, { secure: true })).toBe(
      '__Host-cloudops_page_a1b2c3d4e5f60718=abc; Path=/; Max-Age=600; HttpOnly; SameSite=Strict; Secure',
    );
    expect(sessionCookie('abc', '/verify/tok', link, { secure: false })).toBe(
      'cloudops_page=abc; Path=/verify/tok; Max-Age=600; HttpOnly; SameSite=Strict',
    );
    expect(
      setCookie('cloudops_sso', 'id', {
        path: '/auth/callback',
        sameSite: 'Lax',
        secure: true,
        maxAgeS: 600,
      }),
    ).toBe('cloudops_sso=id; Path=/auth/callback; Max-Age=600; HttpOnly; SameSite=Lax; Secure');
  });

  it('its CSP allows nothing but this server, no framing, and forms only here and at the SSO provider', () => {
    expect(contentSecurityPolicy(['https://login.example.com'])).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'self' https://login.example.com",
    );
  });

  it('escapes what it shows', () => {
    expect(esc(`<script>"x" & 'y'</script>`)).toBe(
      '&lt;script&gt;&quot;x&quot; &amp; &#39;y&#39;&lt;/script&gt;',
    );
    expect(messagePage('<b>', '<img src=x>', 'refused')).not.toContain('<img');
  });

  it("a break-glass link's page says what verifying does and shows the typed reason, escaped", () => {
    const request = { ...resizeRequest({ target: { cores: 6 } }), id: 'R7K2M9QX' } as CloudRequest;
    const page = approvalPage({
      request,
      approver: 'U0ADMIN',
      methods: ['passkey'],
      base: '/verify/tok',
      csrf: 'c',
      ssoAvailable: false,
      root: '',
      breakGlass: { reason: '<img src=x onerror=alert(1)> "hotfix"\nline two' },
    });
    expect(page).toContain('<title>Verify your break glass · cloudops</title>');
    expect(page).toContain(
      'Your break glass of request <strong>R7K2M9QX</strong> runs it now, during the freeze',
    );
    expect(page).toContain('&lt;img src=x onerror=alert(1)&gt; &quot;hotfix&quot;\nline two');
    expect(page).not.toContain('<img');
    // The same script drives it: the passkey button of an approval.
    expect(page).toContain('data-mode="approve"');
    expect(page).toContain('id="passkey"');
  });
});
