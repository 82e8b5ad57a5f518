import { createHash, randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import type { VerificationLinks } from '../requests/approval/verified-approval.ts';
import type { VerifyClaims } from '../requests/model/verification.ts';

/*
 * The approvers' links (docs/policy.md#verified-approvals): a random token in the URL, only its hash in Redis. A link
 * works for ten minutes and once: opening it (a GET, which Slack's unfurler and mail scanners also do) reads it, and
 * only a verification that completes consumes it, in one script, so two tabs racing cannot both count.
 */

/** How long a link works after it is issued. */
export const LINK_TTL_MS = 10 * 60_000;
/** How long a used or expired link is remembered, so its page can say so instead of "unknown". */
const REMEMBER_S = 24 * 3600;

/** What a link is for: one approval (its claims), or registering a passkey for one Slack user. */
export type LinkPurpose =
  | { kind: 'approve'; claims: VerifyClaims }
  | { kind: 'register'; teamId: string; user: string };

/** A link's state as the page sees it; `open` carries what it is for. */
export type LinkState =
  | { status: 'open'; purpose: LinkPurpose; expiresAt: number }
  | { status: 'used' | 'expired' | 'unknown' };

/** 256 bits of randomness, base64url: 43 characters. */
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

/** The key part of a token: a SHA-256, so Redis never holds a usable link. */
export function tokenKey(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

// KEYS[1] the link; ARGV[1] now (ms). Marks it used only when it is open and unexpired.
const CONSUME = `
local used = redis.call('HGET', KEYS[1], 'used')
if not used then return 'unknown' end
if used == '1' then return 'used' end
if tonumber(ARGV[1]) > tonumber(redis.call('HGET', KEYS[1], 'expiresAt')) then return 'expired' end
redis.call('HSET', KEYS[1], 'used', '1')
return 'ok'`;

/** The link store on Redis under the cluster's prefix. */
export class LinkStore {
  constructor(
    private readonly redis: Redis | Cluster,
    private readonly prefix: string,
    private readonly publicUrl: string,
    private readonly now: () => Date,
  ) {}

  private key(token: string): string {
    return `${this.prefix}:verify:link:${tokenKey(token)}`;
  }

  /** Stores a new link for `purpose` and returns its URL on PUBLIC_URL (`/verify/…` or `/passkeys/…`). */
  async issue(purpose: LinkPurpose): Promise<string> {
    const token = randomBytes(32).toString('base64url');
    const expiresAt = this.now().getTime() + LINK_TTL_MS;
    const key = this.key(token);
    await this.redis
      .multi()
      .hset(key, 'purpose', JSON.stringify(purpose), 'expiresAt', String(expiresAt), 'used', '0')
      .expire(key, REMEMBER_S)
      .exec();
    return `${this.publicUrl}/${purpose.kind === 'approve' ? 'verify' : 'passkeys'}/${token}`;
  }

  /** The link's state without using it up (a GET of the page, a prefetch). */
  async peek(token: string): Promise<LinkState> {
    if (!TOKEN.test(token)) return { status: 'unknown' };
    const [purpose, expiresAt, used] = await this.redis.hmget(
      this.key(token),
      'purpose',
      'expiresAt',
      'used',
    );
    if (purpose === null || purpose === undefined || !expiresAt) return { status: 'unknown' };
    if (used === '1') return { status: 'used' };
    if (this.now().getTime() > Number(expiresAt)) return { status: 'expired' };
    return { status: 'open', purpose: JSON.parse(purpose) as LinkPurpose, expiresAt: Number(expiresAt) };
  }

  /** Uses the link up, once: 'ok' for the one caller that did; else why not. */
  async consume(token: string): Promise<'ok' | 'used' | 'expired' | 'unknown'> {
    if (!TOKEN.test(token)) return 'unknown';
    const result = await this.redis.eval(CONSUME, 1, this.key(token), String(this.now().getTime()));
    return result as 'ok' | 'used' | 'expired' | 'unknown';
  }

  /** The lifecycle's view: approval links only. */
  approvalLinks(): VerificationLinks {
    return { issue: (claims) => this.issue({ kind: 'approve', claims }) };
  }
}
