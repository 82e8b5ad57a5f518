import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runProcess } from '../helpers/run-process.ts';

// The bot logs JSON lines on stdout and one-line reasons on stderr; a Node warning printed the first time an
// approver registers a passkey would be a stray line in both the log and a green test run. The WebAuthn library's
// default algorithms ask Node whether it can verify ML-DSA, an experimental Web Crypto call that warns on Node 24.
const repo = fileURLToPath(new URL('../../', import.meta.url));

describe('passkey options in a process of their own', () => {
  it('registration and sign-in options print nothing on stderr, and offer the usual algorithms', async () => {
    const script = `
      const { registrationOptions, assertionOptions } = await import('./src/verify/passkeys.ts');
      const rp = { rpID: 'ops.example.com', origin: 'https://ops.example.com' };
      const registering = await registrationOptions(rp, 'T0001', 'U0001', []);
      await assertionOptions(rp);
      console.log(JSON.stringify(registering.pubKeyCredParams.map((p) => p.alg)));
    `;
    const ran = await runProcess(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: repo,
      env: { PATH: process.env.PATH ?? '' },
      timeoutMs: 60_000,
    });
    expect(ran.stderr).toBe('');
    expect(ran.code).toBe(0);
    // EdDSA, ES256 and RS256 (COSE ids): what passkeys use today.
    expect(JSON.parse(ran.stdout)).toEqual([-8, -7, -257]);
  });
});
