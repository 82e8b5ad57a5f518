import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SlackStandIn, startSlackStandIn } from '../../sim/slack/server.ts';
import { checkSlackToken, StartupError } from '../../src/startup/checks.ts';
import { startRefusingProxy } from '../helpers/proxies.ts';

// The start-up's Slack check against the Slack stand-in and a peer that never answers (the child-process tests in
// ops-fail-fast.test.ts prove the same through `npm start`; these pin the edges a loaded machine reaches).
let slack: SlackStandIn;
let hanging: Server;
let hangingUrl: string;

beforeAll(async () => {
  slack = await startSlackStandIn({ botToken: 'xoxb-startup-checks' });
  hanging = createServer(() => undefined);
  await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve));
  const address = hanging.address();
  hangingUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/api/`;
});

afterAll(async () => {
  hanging.closeAllConnections();
  await new Promise<void>((resolve) => hanging.close(() => resolve()));
  await slack.close();
});

describe('checkSlackToken', () => {
  it('accepts a working token, whatever fraction of a millisecond its deadline has', async () => {
    await expect(checkSlackToken('xoxb-startup-checks', slack.apiUrl, 3999.7)).resolves.toMatchObject({
      ok: true,
    });
  });

  it('throws a StartupError naming the refusal for a token Slack refuses, never the token', async () => {
    const check = checkSlackToken('xoxb-refused-by-slack', slack.apiUrl, 2_000);
    await expect(check).rejects.toBeInstanceOf(StartupError);
    await expect(check).rejects.toThrow(/^SLACK_BOT_TOKEN: Slack refused the token \(invalid_auth\)$/);
  });

  it('reports a Slack that does not answer within its deadline, without throwing', async () => {
    // The server never answers: without its deadline the check would never end.
    const check = await checkSlackToken('xoxb-startup-checks', hangingUrl, 300.4);
    expect(check).toEqual({ ok: false, why: `Slack did not answer auth.test at ${hangingUrl} within 0.3 s` });
  });

  it('says a proxy asked for authentication (forwarded or tunnelled), never its password nor undici’s code', async () => {
    const proxy = await startRefusingProxy(407);
    try {
      const settings = {
        HTTP_PROXY: `http://ops:s3cret@127.0.0.1:${proxy.port}`,
        HTTPS_PROXY: `http://ops:s3cret@127.0.0.1:${proxy.port}`,
      };
      for (const apiUrl of [slack.apiUrl, 'https://slack.example.test/api/']) {
        const check = await checkSlackToken('xoxb-startup-checks', apiUrl, 2_000, undefined, settings);
        expect(check.ok).toBe(false);
        const why = check.ok ? '' : check.why;
        expect(why).toContain('could not be reached: the proxy asked for authentication (HTTP 407)');
        expect(why).toContain('check the user and password in HTTPS_PROXY / HTTP_PROXY');
        expect(why).not.toMatch(/s3cret|UND_ERR|SLACK_API_URL/);
      }
    } finally {
      await proxy.close();
    }
  });
});
