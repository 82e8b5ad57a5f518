import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SlackStandIn, startSlackStandIn } from '../../sim/slack/server.ts';
import { loadEnv } from '../../src/config/env.ts';
import { outboundDispatcher, type ProxyEnv, proxyFor } from '../../src/config/outbound.ts';
import { SlackApi } from '../../src/slack-api/client.ts';
import { type ForwardProxy, startForwardProxy } from '../helpers/proxies.ts';

const TOKEN = 'xoxb-outbound-proxy-test';
let proxy: ForwardProxy;
let slack: SlackStandIn;

beforeAll(async () => {
  proxy = await startForwardProxy();
  slack = await startSlackStandIn({ botToken: TOKEN });
});
afterAll(async () => {
  await slack?.close();
  await proxy?.close();
});

/** Whether undici's dispatcher sent a request for `url` through the proxy (the proxy saw it) or directly. */
async function undiciProxied(url: string, settings: ProxyEnv): Promise<boolean> {
  const dispatcher = outboundDispatcher(settings, { connect: { timeout: 1_000 } });
  const before = proxy.calls.length;
  try {
    await dispatcher.request({
      origin: new URL(url).origin,
      path: '/probe',
      method: 'GET',
      signal: AbortSignal.timeout(2_000),
    });
  } catch {
    // A direct call to a name that does not resolve fails: only whether the proxy saw it counts.
  } finally {
    await dispatcher.destroy();
  }
  return proxy.calls.length > before;
}

describe('the outbound proxy', { timeout: 60_000 }, () => {
  it('doctor’s proxyFor decides as undici’s EnvHttpProxyAgent does, for each kind of NO_PROXY entry', async () => {
    const cases: [noProxy: string, url: string][] = [
      ['', 'http://api.example.com'],
      ['example.com', 'http://api.example.com'],
      ['example.com', 'http://example.com'],
      ['.example.com', 'http://example.com'],
      ['*.example.com', 'http://example.com'],
      ['*.example.com', 'http://a.example.com'],
      ['example.com:8080', 'http://api.example.com'],
      ['example.com:8080', 'http://api.example.com:8080'],
      ['other.org, example.com', 'http://x.example.com'],
      ['other.org example.com', 'http://x.example.com'],
      ['*', 'http://anything.test'],
      ['ample.com', 'http://example.com'],
      ['127.0.0.1', new URL(slack.apiUrl).origin],
      ['localhost', new URL(slack.apiUrl).origin],
      ['EXAMPLE.com', 'http://api.example.com'],
    ];
    for (const [noProxy, url] of cases) {
      const settings = { HTTP_PROXY: proxy.url, NO_PROXY: noProxy };
      const predicted = proxyFor(url, settings) !== undefined;
      expect(await undiciProxied(url, settings), `NO_PROXY=${noProxy} ${url}`).toBe(predicted);
    }
  });

  it('reads either case, the lower-case name winning, and refuses a proxy that is not a URL without echoing it', () => {
    const env = loadEnv({
      HTTPS_PROXY: 'http://upper:3128',
      https_proxy: 'http://lower:3128',
      NO_PROXY: 'a.test',
    });
    expect(env).toMatchObject({ HTTPS_PROXY: 'http://lower:3128', NO_PROXY: 'a.test' });
    expect(loadEnv({ no_proxy: 'b.test' }).NO_PROXY).toBe('b.test');
    expect(() => loadEnv({ HTTP_PROXY: 'proxy.corp:3128 s3cret' })).toThrow(
      'HTTP_PROXY: expected the proxy as an http(s) URL, such as http://proxy.example.com:3128',
    );
  });

  it('a file upload goes through it, every step, with the proxy’s credentials and without them in what doctor shows', async () => {
    const settings = { HTTP_PROXY: `http://ops:s3cret@127.0.0.1:${proxy.port}` };
    const api = new SlackApi({ apiUrl: slack.apiUrl, token: TOKEN, proxy: settings });
    const before = proxy.calls.length;
    try {
      await api.uploadFile({ filename: 'chart.png', bytes: Buffer.from('png bytes'), channel: 'C0OPS' });
    } finally {
      await api.close();
    }
    const calls = proxy.calls.slice(before);
    expect(calls.map((c) => new URL(c.target).pathname)).toEqual([
      '/api/files.getUploadURLExternal',
      expect.stringMatching(/^\/upload\//),
      '/api/files.completeUploadExternal',
    ]);
    const basic = `Basic ${Buffer.from('ops:s3cret').toString('base64')}`;
    for (const call of calls) expect(call.proxyAuthorization).toBe(basic);
    expect(proxyFor(slack.apiUrl, settings)).toBe(`http://127.0.0.1:${proxy.port}`);
  });
});
