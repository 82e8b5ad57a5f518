import { randomUUID } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { LuaScript } from '../requests/store/lua.ts';
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

/**
 * Extends the lock if it still holds our token and then sets a key unless it exists, in one round trip.
 * KEYS: lock, key. ARGV: token, ttl ms, value, key ttl s. Returns 0 (lock lost, nothing set), 1 (set), 2 (existed).
 */
const CONFIRM_AND_SET_NX = new LuaScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if redis.call('SET', KEYS[2], ARGV[3], 'EX', ARGV[4], 'NX') then return 1 end
return 2
`);

/** What `HeldLock.confirmAndSetNx` found: the lock gone (nothing set), the key set, or the key already there. */
export type ConfirmAndSet = 'lost' | 'set' | 'exists';

/** A lock this process holds; `release` is safe to call twice. */
export interface HeldLock {
  /** False once a renewal found the lock gone (expired and maybe taken by another worker). */
  readonly held: boolean;
  /** Extends the lock now; false when it is no longer ours. */
  confirm(): Promise<boolean>;
  /** Extends the lock and, only if it is still ours, sets `key` unless it exists (atomically). */
  confirmAndSetNx(key: string, value: string, ttlS: number): Promise<ConfirmAndSet>;
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
    private readonly redis: Redis | Cluster,
    private readonly prefix: string,
    private readonly policy: LockPolicy,
    /**
     * The connection the timer renews held locks on. Not `redis` in the workers: with Sentinels their writes are
     * followed by WAIT on that connection, and each WAIT holds it until a replica answers (up to a second while none
     * follows the master, as after a failover). Renewals queued behind a run of them let locks expire while their
     * holders were still settling calls they had sent; a second run of such a job (BullMQ runs a job again when its
     * own lock was lost in the failover) would then take the VM and end the request 'unknown' on its step's marker.
     */
    private readonly renewals: Redis | Cluster = redis,
  ) {}

  private key(projectUuid: string, vmid: number): string {
    return `${this.prefix}:vmlock:${projectUuid.toLowerCase()}:${vmid}`;
  }

  /** Takes the VM's lock, or returns undefined when another job holds it. */
  async acquire(projectUuid: string, vmid: number): Promise<HeldLock | undefined> {
    const key = this.key(projectUuid, vmid);
    const token = randomUUID();
    const ok = await this.redis.set(key, token, 'PX', this.policy.ttlMs, 'NX');
    return ok === 'OK' ? this.hold(key, token) : undefined;
  }

  /**
   * Takes the VM's lock with `script`, whose KEYS[1] is the lock and ARGV[1] and ARGV[2] the token and the TTL (then
   * `keys` and `args`), so what it reads or writes after `SET NX` happens under the lock in the same round trip. The
   * script answers a table whose first element is 0 when another job holds the lock: then undefined.
   */
  async acquireWith(
    projectUuid: string,
    vmid: number,
    script: LuaScript,
    keys: string[],
    args: (string | number)[],
  ): Promise<{ lock: HeldLock; reply: unknown[] } | undefined> {
    const key = this.key(projectUuid, vmid);
    const token = randomUUID();
    const reply = (await script.run(
      this.redis,
      [key, ...keys],
      [token, this.policy.ttlMs, ...args],
    )) as unknown[];
    if (Number(reply[0]) === 0) return undefined;
    return { lock: this.hold(key, token), reply };
  }

  /** The handle of a lock just taken: renewed on a timer until released. */
  private hold(key: string, token: string): HeldLock {
    let held = true;
    const timer = setInterval(() => {
      RENEW.run(this.renewals, [key], [token, this.policy.ttlMs]).then(
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
      confirmAndSetNx: async (setKey, value, ttlS) => {
        if (released) return 'lost';
        const reply = Number(
          await CONFIRM_AND_SET_NX.run(this.redis, [key, setKey], [token, this.policy.ttlMs, value, ttlS]),
        );
        held = reply !== 0;
        return reply === 0 ? 'lost' : reply === 1 ? 'set' : 'exists';
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
