import { describe, expect, it } from 'vitest';
import { isLoopback } from '../../src/doctor/redis-access.ts';

describe('doctor: which Redis addresses are this machine (no TLS warning for them)', () => {
  it('127.0.0.0/8, ::1 and IPv4 loopback written as IPv6 are loopback', () => {
    for (const address of ['127.0.0.1', '127.1.2.3', '::1', '[::1]', '::ffff:127.0.0.1', 'localhost'])
      expect(isLoopback(address), address).toBe(true);
  });

  it('a container network, a private LAN, a public address or a name are not', () => {
    for (const address of [
      '172.18.0.2',
      '10.0.0.5',
      '192.168.1.10',
      '203.0.113.7',
      'fd00::2',
      '::ffff:10.0.0.1',
      '128.0.0.1',
    ])
      expect(isLoopback(address), address).toBe(false);
  });
});
