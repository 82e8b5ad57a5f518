/**
 * The bot's sealing keys (`SEAL_KEY`, and `SEAL_KEY_PREVIOUS` while a rotation is under way): HMACs that let the
 * worker and the page tell a decision the bot's own processes recorded from one written into Redis by anyone else
 * (docs/configuration.md#seal-key). Each purpose seals under a key of its own, derived with HKDF, so a seal made for
 * one purpose (an audit entry) never checks as another (a decision).
 */
import {
  createHash,
  createHmac,
  createSecretKey,
  hkdfSync,
  type KeyObject,
  timingSafeEqual,
} from 'node:crypto';

/** What a seal is for: each purpose has a key of its own. */
export type SealPurpose = 'decision' | 'audit' | 'verify';

export interface SealKeys {
  /** The current key's id: the first 12 hex digits of the SHA-256 of the key's bytes. */
  readonly kid: string;
  /** The previous key's id, while `SEAL_KEY_PREVIOUS` is set. */
  readonly previousKid?: string;
  /** `kid.mac`: an HMAC-SHA256 (base64url) of the key's id and `data` under the purpose's key. Never the previous key. */
  seal(purpose: SealPurpose, data: string): string;
  /** Whether `seal` is `data`'s seal under the current or the previous key; false on any malformed seal. */
  check(purpose: SealPurpose, data: string, seal: string): boolean;
}

/** The fewest random bytes a sealing key may hold. */
export const SEAL_KEY_MIN_BYTES = 32;

/** What was wrong with a key given: its variable is in the message, never its value. */
export type SealKeyProblem = 'seal_key_missing' | 'seal_key_malformed' | 'seal_key_short';

/** A sealing key that cannot be used; the message names its variable. */
export class SealKeyError extends Error {
  override readonly name = 'SealKeyError';
  constructor(
    readonly code: SealKeyProblem,
    readonly variable: 'SEAL_KEY' | 'SEAL_KEY_PREVIOUS',
    message: string,
  ) {
    super(`${variable}: ${message}`);
  }
}

const HINT = 'give at least 32 random bytes as hex or base64, e.g. from openssl rand -hex 32';
const SALT = 'cloudops seal v1';
const MAC_BYTES = 32;
const KID = /^[0-9a-f]{12}$/;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/**
 * A key's bytes: hex when it reads as hex (64 hex digits would also parse as base64, but `openssl rand -hex` is
 * what the docs show), base64 or base64url otherwise. Undefined when it is neither.
 */
export function sealKeyBytes(value: string): Buffer | undefined {
  const text = value.trim();
  if (/^(?:[0-9a-fA-F]{2})+$/.test(text)) return Buffer.from(text, 'hex');
  if (/^[A-Za-z0-9+/]+={0,2}$/.test(text) || /^[A-Za-z0-9_-]+$/.test(text)) {
    const bytes = Buffer.from(text.replace(/=+$/, ''), 'base64');
    // Node's decoder skips what it cannot read: a length that does not round-trip was not base64.
    if (bytes.length === Math.floor((text.replace(/=+$/, '').length * 3) / 4)) return bytes;
  }
  return undefined;
}

/** Why `value` cannot be a sealing key, as a phrase; undefined when it can. */
export function sealKeyProblem(value: string): { code: SealKeyProblem; message: string } | undefined {
  if (value.trim() === '') return { code: 'seal_key_missing', message: `not set; ${HINT}` };
  const bytes = sealKeyBytes(value);
  if (bytes === undefined) return { code: 'seal_key_malformed', message: `neither hex nor base64; ${HINT}` };
  if (bytes.length < SEAL_KEY_MIN_BYTES)
    return { code: 'seal_key_short', message: `${bytes.length} bytes is too short; ${HINT}` };
  return undefined;
}

function keyOf(variable: 'SEAL_KEY' | 'SEAL_KEY_PREVIOUS', value: string) {
  const problem = sealKeyProblem(value);
  if (problem) throw new SealKeyError(problem.code, variable, problem.message);
  const bytes = sealKeyBytes(value) as Buffer;
  const kid = createHash('sha256').update(bytes).digest('hex').slice(0, 12);
  // Derived once, as KeyObjects: an HMAC over a raw Buffer key imports the key on every call, several times the
  // cost of the MAC itself on the click path.
  const derived = new Map<SealPurpose, KeyObject>();
  for (const purpose of ['decision', 'audit', 'verify'] as const)
    derived.set(
      purpose,
      createSecretKey(Buffer.from(hkdfSync('sha256', bytes, SALT, `cloudops ${purpose}`, 32))),
    );
  const mac = (purpose: SealPurpose, data: string) =>
    createHmac('sha256', derived.get(purpose) as KeyObject)
      .update(`${kid}\n`)
      .update(data)
      .digest();
  return { kid, mac };
}

/**
 * The sealing keys from `SEAL_KEY` and, during a rotation, `SEAL_KEY_PREVIOUS` (accepted for checking, never for
 * sealing). Throws a {@link SealKeyError} naming the variable when a key is missing, malformed or shorter than
 * 32 bytes; the bot never makes one up.
 */
export function sealKeysFrom(current: string, previous?: string): SealKeys {
  const now = keyOf('SEAL_KEY', current);
  const before =
    previous === undefined || previous.trim() === '' ? undefined : keyOf('SEAL_KEY_PREVIOUS', previous);
  const keys = before && before.kid !== now.kid ? [now, before] : [now];
  return {
    kid: now.kid,
    ...(before && before.kid !== now.kid ? { previousKid: before.kid } : {}),
    seal: (purpose, data) => `${now.kid}.${now.mac(purpose, data).toString('base64url')}`,
    check(purpose, data, seal) {
      if (typeof seal !== 'string' || seal.length > 12 + 1 + 64) return false;
      const dot = seal.indexOf('.');
      const kid = seal.slice(0, dot);
      const mac = seal.slice(dot + 1);
      if (dot < 0 || !KID.test(kid) || !BASE64URL.test(mac)) return false;
      const given = Buffer.from(mac, 'base64url');
      if (given.length !== MAC_BYTES || given.toString('base64url') !== mac) return false;
      const key = keys.find((k) => k.kid === kid);
      return key !== undefined && timingSafeEqual(key.mac(purpose, data), given);
    },
  };
}
