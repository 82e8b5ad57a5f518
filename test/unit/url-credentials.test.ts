import { describe, expect, it } from 'vitest';
import { redactUrl, urlCredentials } from '../../src/config/redis-connection.ts';

describe('the credentials a configured URL carries', () => {
  it("REDIS_URL's password, as written and decoded, and a ?password= (which ioredis honours)", () => {
    const url = 'redis://default:p%40ss-w0rd@10.0.0.5:6379/0?password=query-pw-1&db=0';
    expect(urlCredentials(url).sort()).toEqual(['p%40ss-w0rd', 'p@ss-w0rd', 'query-pw-1'].sort());
    for (const secret of urlCredentials(url)) expect(redactUrl(url)).not.toContain(secret);
  });

  it('a token in the query of a receiver or collector URL; nothing from a URL without any', () => {
    expect(urlCredentials('https://logs.example.com/in?token=t0k3n-77&team=ops')).toEqual(['t0k3n-77']);
    expect(urlCredentials('https://logs.example.com/in?team=ops')).toEqual([]);
    expect(urlCredentials(undefined)).toEqual([]);
    expect(urlCredentials('not a url')).toEqual([]);
  });
});
