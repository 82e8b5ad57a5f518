import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Cluster, Redis } from 'ioredis';
import type { SealKeys } from '../config/seal-keys.ts';
import { LINK_TTL_MS } from './links.ts';
import { VerifySeals } from './seals.ts';

/*
 * The page's session: an opaque id in an HttpOnly cookie scoped to the link's path, and server side the link it
 * belongs to, the CSRF token every POST must carry, the WebAuthn challenge in flight and whether the person proved
 * an existing passkey (for adding another). Nothing in the cookie means anything without Redis.
 */

/** What the server keeps of one page session. */
export interface PageSession {
  link: string;
  csrf: string;
  challenge?: string;
  proven?: string;
  /** SEAL_KEY's seal of the session's key, link, CSRF token and proof (src/verify/seals.ts). */
  seal?: string;
  /** The seal of the challenge in flight. */
  challengeSeal?: string;
}

const random = () => randomBytes(32).toString('base64url');
const hash = (value: string) => createHash('sha256').update(value).digest('hex');

/** `a` equals `b`, compared in constant time. */
export function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** One cookie of the request by name; undefined when absent. */
export function cookieOf(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [key, ...rest] = part.trim().split('=');
    if (key === name) return rest.join('=');
  }
  return undefined;
}

/** A Set-Cookie value: HttpOnly always, Secure on https, SameSite and Path as given. */
export function setCookie(
  name: string,
  value: string,
  options: { path: string; sameSite: 'Strict' | 'Lax'; secure: boolean; maxAgeS: number },
): string {
  return [
    `${name}=${value}`,
    `Path=${options.path}`,
    `Max-Age=${options.maxAgeS}`,
    'HttpOnly',
    `SameSite=${options.sameSite}`,
    ...(options.secure ? ['Secure'] : []),
  ].join('; ');
}

/** How many page sessions one link may open in its ten minutes: a person opens a page a few times, not hundreds. */
export const SESSIONS_PER_LINK = 20;

// KEYS[1] the link's count of sessions, KEYS[2] the new session; ARGV[1] ttl (ms), ARGV[2] the cap, ARGV[3] link,
// ARGV[4] csrf, ARGV[5] seal. Opens the session unless the link opened the cap already.
const OPEN = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
if n > tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[2], 'link', ARGV[3], 'csrf', ARGV[4], 'seal', ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return 1`;

/** How many SSO logins one link may start in its ten minutes: each keeps what it needs to finish for ten minutes. */
export const SSO_STARTS_PER_LINK = 20;

// KEYS[1] a count; ARGV[1] ttl (ms), ARGV[2] the cap. 1 while the count stays within the cap.
const COUNT = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
if n > tonumber(ARGV[2]) then return 0 end
return 1`;

/** Page sessions on Redis, living as long as a link does. */
export class PageSessions {
  private readonly seals: VerifySeals;

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly prefix: string,
    /** SEAL_KEY's keys: a session whose seal fails is no session. */
    keys?: SealKeys,
  ) {
    this.seals = new VerifySeals(keys, redis, prefix);
  }

  private key(id: string): string {
    return `${this.prefix}:verify:session:${hash(id)}`;
  }

  /** The seal of a session: bound to its key, so it cannot be moved onto another id. */
  private sealOf(key: string, link: string, csrf: string, proven = ''): string {
    return this.seals.seal(['session', key, link, csrf, proven]) ?? '';
  }

  /** The session's fields when they are whole and sealed; undefined otherwise (a failed seal is audited). */
  private async read(id: string): Promise<PageSession | undefined> {
    const key = this.key(id);
    const fields = (await this.redis.hgetall(key)) as Partial<PageSession>;
    if (!fields.link || !fields.csrf) return undefined;
    const parts = ['session', key, fields.link, fields.csrf, fields.proven ?? ''];
    if (!(await this.seals.holds(parts, fields.seal, 'a page session'))) return undefined;
    return fields as PageSession;
  }

  /**
   * A new session for the link with key `link`: its cookie id and CSRF token; undefined when the link opened
   * {@link SESSIONS_PER_LINK} already (each is kept ten minutes: a flood of opens would fill Redis).
   */
  async open(link: string): Promise<{ id: string; csrf: string } | undefined> {
    const id = random();
    const csrf = random();
    const count = `${this.prefix}:verify:opens:${link}`;
    const key = this.key(id);
    const seal = this.sealOf(key, link, csrf);
    const opened = await this.redis.eval(
      OPEN,
      2,
      count,
      key,
      LINK_TTL_MS,
      SESSIONS_PER_LINK,
      link,
      csrf,
      seal,
    );
    return opened === 1 ? { id, csrf } : undefined;
  }

  /** Counts one SSO login started on the link with key `link`: false past {@link SSO_STARTS_PER_LINK}. */
  async ssoStart(link: string): Promise<boolean> {
    const count = `${this.prefix}:verify:sso-starts:${link}`;
    return (await this.redis.eval(COUNT, 1, count, LINK_TTL_MS, SSO_STARTS_PER_LINK)) === 1;
  }

  /**
   * Replaces session `id` with a new one (new id, new CSRF token) that has `proven`: a login or a passkey proof never
   * proves a session id someone else may know (one planted in the browser before). The old session ends.
   */
  async renew(id: string, link: string, proven: string): Promise<{ id: string; csrf: string }> {
    const renewed = { id: random(), csrf: random() };
    const key = this.key(renewed.id);
    await this.redis
      .multi()
      .del(this.key(id))
      .hset(
        key,
        'link',
        link,
        'csrf',
        renewed.csrf,
        'proven',
        proven,
        'seal',
        this.sealOf(key, link, renewed.csrf, proven),
      )
      .pexpire(key, LINK_TTL_MS)
      .exec();
    return renewed;
  }

  /** The session `id` when it belongs to `link` (a page opened again, e.g. back from the SSO login). */
  async resume(id: string | undefined, link: string): Promise<(PageSession & { id: string }) | undefined> {
    if (!id) return undefined;
    const fields = await this.read(id);
    return fields?.link === link ? { ...fields, id } : undefined;
  }

  /** The session of `id` when it belongs to `link` and `csrf` is its token; else undefined. */
  async check(
    id: string | undefined,
    link: string,
    csrf: string | undefined,
  ): Promise<PageSession | undefined> {
    if (!id || !csrf) return undefined;
    const fields = await this.read(id);
    if (!fields || fields.link !== link || !sameSecret(fields.csrf, csrf)) return undefined;
    return fields;
  }

  /** Sets the challenge in flight, sealed to this session. */
  async set(id: string, field: 'challenge', value: string): Promise<void> {
    const key = this.key(id);
    const seal = this.seals.seal(['challenge', key, value]) ?? '';
    await this.redis.hset(key, field, value, 'challengeSeal', seal);
  }

  /** Takes the challenge in flight: a challenge answers once, and only one the bot set (its seal checks). */
  async takeChallenge(id: string): Promise<string | undefined> {
    const key = this.key(id);
    const results = await this.redis
      .multi()
      .hmget(key, 'challenge', 'challengeSeal')
      .hdel(key, 'challenge', 'challengeSeal')
      .exec();
    const [value, seal] = (results?.[0]?.[1] ?? []) as (string | null)[];
    if (typeof value !== 'string') return undefined;
    // A challenge written outside the bot would let an answer captured elsewhere be replayed here.
    return (await this.seals.holds(['challenge', key, value], seal ?? undefined, 'a page challenge'))
      ? value
      : undefined;
  }
}
