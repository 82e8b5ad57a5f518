import type { Cluster, Redis } from 'ioredis';
import type { SealKeys } from '../config/seal-keys.ts';
import { requestKeys } from '../requests/store/keys.ts';

/*
 * What lets a person pass verification is sealed under SEAL_KEY's `verify` purpose: each stored passkey (its person,
 * credential id and public key), each link (what it is for, until when) and each page session (its link, CSRF token,
 * proof and challenge). Whoever can write to Redis but holds no SEAL_KEY cannot make one that checks: a passkey, link
 * or session whose seal fails grants nothing, and the refusal is audited (`seal_invalid`).
 */

/** Seals and checks the page's records; without keys (a store used by the CLI to remove) it seals nothing. */
export class VerifySeals {
  constructor(
    private readonly keys: SealKeys | undefined,
    private readonly redis: Redis | Cluster,
    private readonly prefix: string,
  ) {}

  /** The seal of a record's `parts` (JSON-encoded, so no two lists read alike); undefined without keys. */
  seal(parts: string[]): string | undefined {
    return this.keys?.seal('verify', JSON.stringify(parts));
  }

  /**
   * Whether `seal` is the seal of `parts`; when it is not, audits `seal_invalid` naming `what` (never a secret) and
   * answers false. Without keys every record holds (nothing was sealed).
   */
  async holds(parts: string[], seal: string | undefined, what: string): Promise<boolean> {
    if (!this.keys) return true;
    if (seal !== undefined && this.keys.check('verify', JSON.stringify(parts), seal)) return true;
    await this.redis
      .xadd(
        requestKeys(this.prefix).audit,
        '*',
        'requestId',
        '',
        'state',
        'seal_invalid',
        'actor',
        'cloudops',
        'detail',
        `${what}: its seal does not check (written outside the bot, or under another SEAL_KEY), so it grants nothing`,
      )
      .catch(() => undefined);
    return false;
  }
}
