import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { LuaScript } from '../requests/lua.ts';
import type { LockPolicy } from './retry-policy.ts';

/** Deletes the lock only if it still holds our token. KEYS: lock. ARGV: token. */
const RELEASE = new LuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`);

/** Extends the lock only if it still holds our token. KEYS: lock. ARGV: token, ttl ms. */
const RENEW = new LuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`);

/** A lock this process holds; `release` is safe to call twice. */
export interface HeldLock {
  /** False once a renewal found the lock gone (expired and maybe taken by another worker). */
  readonly held: boolean;
  /** Extends the lock now; false when it is no longer ours. */
  confirm(): Promise<boolean>;
  release(): Promise<void>;
}

/** The lock expired under its holder (a long pause): the holder must not mutate. */
export class LockLostError extends Error {
  override readonly name = 'LockLostError';
  readonly code = 'LOCK_LOST';
}

/**
 * One mutation per VM at a time, across processes: `SET NX PX` with a random token, renewed while held, released
 * by a script that checks the token so a worker never frees a lock another one took after expiry.
 */
export class VmLock {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly policy: LockPolicy,
  ) {}

  private key(projectUuid: string, vmid: number): string {
    return `${this.prefix}:vmlock:${projectUuid.toLowerCase()}:${vmid}`;
  }

  /** Takes the VM's lock, or returns undefined when another job holds it. */
  async acquire(projectUuid: string, vmid: number): Promise<HeldLock | undefined> {
    const key = this.key(projectUuid, vmid);
    const token = randomUUID();
    const ok = await this.redis.set(key, token, 'PX', this.policy.ttlMs, 'NX');
    if (ok !== 'OK') return undefined;
    let held = true;
    const timer = setInterval(() => {
      RENEW.run(this.redis, [key], [token, this.policy.ttlMs]).then(
        (renewed) => {
          if (Number(renewed) !== 1) held = false;
        },
        // A failed renewal (Redis briefly away) is retried at the next tick; the TTL covers the gap.
        () => undefined,
      );
    }, this.policy.renewEveryMs);
    timer.unref();
    let released = false;
    return {
      get held() {
        return held;
      },
      confirm: async () => {
        if (released) return false;
        held = Number(await RENEW.run(this.redis, [key], [token, this.policy.ttlMs])) === 1;
        return held;
      },
      release: async () => {
        if (released) return;
        released = true;
        clearInterval(timer);
        await RELEASE.run(this.redis, [key], [token]);
      },
    };
  }
}
