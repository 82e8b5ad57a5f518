import { createHash, randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import type { SealKeys } from '../config/seal-keys.ts';
import type { VerificationLinks } from '../requests/approval/verified-approval.ts';
import type { BreakGlassClaims, VerifyClaims } from '../requests/model/verification.ts';
import { VerifySeals } from './seals.ts';

/*
 * The approvers' and break-glass users' links (docs/policy.md#verified-approvals): a random token in the URL, only its
 * hash in Redis. A link works for ten minutes and once: opening it (a GET, which Slack's unfurler and mail scanners
 * also do) reads it, and only a verification that completes consumes it, in one script, so two tabs racing cannot
 * both count.
 */

/** How long a link works after it is issued. */
export const LINK_TTL_MS = 10 * 60_000;
/** How long a used or expired link is remembered, so its page can say so instead of "unknown". */
const REMEMBER_S = 24 * 3600;

/**
 * What a link is for: one approval (its claims), one break glass (its claims, with the reason typed in Slack), or
 * registering a passkey for one Slack user. The first two share the page at `/verify/…`.
 */
export type LinkPurpose =
  | { kind: 'approve'; claims: VerifyClaims }
  | { kind: 'break_glass'; claims: BreakGlassClaims }
  | { kind: 'register'; teamId: string; user: string };

/** A link's state as the page sees it; `open` carries what it is for. */
export type LinkState =
  | { status: 'open'; purpose: LinkPurpose; expiresAt: number }
  | { status: 'used' | 'expired' | 'unknown' | 'reset' };

/** What using a link up answered: 'ok' for the one caller that did, else why not. */
export type LinkUse = 'ok' | Exclude<LinkState['status'], 'open'>;

/** 256 bits of randomness, base64url: 43 characters. */
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

/** The key part of a token: a SHA-256, so Redis never holds a usable link. */
export function tokenKey(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/**
 * Lua: `link_state(key, now)` is 'ok' when the link at `key` is open and unexpired at `now` (ms), else why not; a
 * script that uses the link up marks it `used` itself, in the same script (the passkey store's registration too).
 */
export const LINK_STATE_LUA = `
local function link_state(key, now)
  local used = redis.call('HGET', key, 'used')
  if not used then return 'unknown' end
  if used == '1' then return 'used' end
  if used == 'reset' then return 'reset' end
  if tonumber(now) > tonumber(redis.call('HGET', key, 'expiresAt')) then return 'expired' end
  return 'ok'
end`;

// KEYS[1] the link; ARGV[1] now (ms). Marks it used only when it is open and unexpired.
const CONSUME = `${LINK_STATE_LUA}
local state = link_state(KEYS[1], ARGV[1])
if state ~= 'ok' then return state end
redis.call('HSET', KEYS[1], 'used', '1')
return 'ok'`;

/** How many registration links one person may hold open at once: each one is a page an attacker could keep. */
export const OPEN_REGISTRATION_LINKS = 5;

/** Too many registration links open for one person: the oldest must be used or expire first. */
export class TooManyLinksError extends Error {
  override readonly name = 'TooManyLinksError';
  readonly code = 'TOO_MANY_LINKS';
  constructor() {
    super(`at most ${OPEN_REGISTRATION_LINKS} registration links are open at once`);
  }
}

/**
 * The registration links open for one person (a sorted set: link key → expiry), so that a passkey reset ends them
 * and their number stays capped. Beside the passkeys, under the same prefix (one slot on a cluster).
 */
export function registrationLinksKey(prefix: string, teamId: string, user: string): string {
  return `${prefix}:passkey-links:${teamId}:${user}`;
}

/** The Redis key of the link of `token`. */
export function linkKey(prefix: string, token: string): string {
  return `${prefix}:verify:link:${tokenKey(token)}`;
}

// KEYS[1] the link, KEYS[2] the person's open registration links; ARGV[1] purpose, ARGV[2] expiresAt, ARGV[3] keep
// (s), ARGV[4] now, ARGV[5] the cap, ARGV[6] the seal. Stores the link unless the person holds the cap of open ones.
const ISSUE_REGISTRATION = `
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[4])
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then return 0 end
redis.call('HSET', KEYS[1], 'purpose', ARGV[1], 'expiresAt', ARGV[2], 'used', '0', 'seal', ARGV[6])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[2], KEYS[1])
redis.call('PEXPIREAT', KEYS[2], ARGV[2])
return 1`;

/** The link store on Redis under the cluster's prefix. */
export class LinkStore {
  private readonly seals: VerifySeals;

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly prefix: string,
    private readonly publicUrl: string,
    private readonly now: () => Date,
    /** SEAL_KEY's keys: a link is sealed when issued, and one whose seal fails is unknown. */
    keys?: SealKeys,
  ) {
    this.seals = new VerifySeals(keys, redis, prefix);
  }

  /** What a link's seal covers: its key, what it is for and until when. */
  private sealed(key: string, purpose: string, expiresAt: string): string[] {
    return ['link', key, purpose, expiresAt];
  }

  private key(token: string): string {
    return linkKey(this.prefix, token);
  }

  /**
   * Stores a new link for `purpose` and returns its URL on PUBLIC_URL (`/verify/…` or `/passkeys/…`). A registration
   * link is refused ({@link TooManyLinksError}) while the person holds {@link OPEN_REGISTRATION_LINKS} open ones.
   */
  async issue(purpose: LinkPurpose): Promise<string> {
    const token = randomBytes(32).toString('base64url');
    const now = this.now().getTime();
    const expiresAt = now + LINK_TTL_MS;
    const key = this.key(token);
    const json = JSON.stringify(purpose);
    const seal = this.seals.seal(this.sealed(key, json, String(expiresAt))) ?? '';
    if (purpose.kind === 'register') {
      const open = registrationLinksKey(this.prefix, purpose.teamId, purpose.user);
      const args = [json, String(expiresAt), String(REMEMBER_S), String(now), OPEN_REGISTRATION_LINKS, seal];
      const stored = await this.redis.eval(ISSUE_REGISTRATION, 2, key, open, ...args);
      if (stored !== 1) throw new TooManyLinksError();
    } else {
      await this.redis
        .multi()
        .hset(key, 'purpose', json, 'expiresAt', String(expiresAt), 'used', '0', 'seal', seal)
        .expire(key, REMEMBER_S)
        .exec();
    }
    return `${this.publicUrl}/${purpose.kind === 'register' ? 'passkeys' : 'verify'}/${token}`;
  }

  /** The link's state without using it up (a GET of the page, a prefetch). */
  async peek(token: string): Promise<LinkState> {
    if (!TOKEN.test(token)) return { status: 'unknown' };
    const key = this.key(token);
    const [purpose, expiresAt, used, seal] = await this.redis.hmget(
      key,
      'purpose',
      'expiresAt',
      'used',
      'seal',
    );
    if (purpose === null || purpose === undefined || !expiresAt) return { status: 'unknown' };
    // A link written outside the bot is not one it issued.
    const parts = this.sealed(key, purpose, expiresAt);
    if (!(await this.seals.holds(parts, seal ?? undefined, 'a verification link')))
      return { status: 'unknown' };
    if (used === '1') return { status: 'used' };
    // A passkey reset ended this registration link (and every page session on it).
    if (used === 'reset') return { status: 'reset' };
    if (this.now().getTime() > Number(expiresAt)) return { status: 'expired' };
    return { status: 'open', purpose: JSON.parse(purpose) as LinkPurpose, expiresAt: Number(expiresAt) };
  }

  /** Uses the link up, once: 'ok' for the one caller that did; else why not. */
  async consume(token: string): Promise<LinkUse> {
    if (!TOKEN.test(token)) return 'unknown';
    const result = await this.redis.eval(CONSUME, 1, this.key(token), String(this.now().getTime()));
    return result as LinkUse;
  }

  /** The lifecycle's view: approval and break-glass links only. */
  approvalLinks(): VerificationLinks {
    return {
      issue: (claims) => this.issue({ kind: 'approve', claims }),
      issueBreakGlass: (claims) => this.issue({ kind: 'break_glass', claims }),
    };
  }
}
