import type { Cluster, Redis } from 'ioredis';
import type { SealKeys } from '../config/seal-keys.ts';
import { AuditAppender } from '../requests/audit/append.ts';
import { standaloneEntry } from '../requests/audit/entry.ts';

/*
 * What lets a person pass verification is sealed under SEAL_KEY's `verify` purpose: each stored passkey (its person,
 * credential id and public key), each link (what it is for, until when) and each page session (its link, CSRF token,
 * proof and challenge). Whoever can write to Redis but holds no SEAL_KEY cannot make one that checks: a passkey, link
 * or session whose seal fails grants nothing, and the refusal is audited (`seal_invalid`).
 */

/** Seals and checks the page's records; without keys (a store used by the CLI to remove) it seals nothing. */
export class VerifySeals {
  private readonly chain: AuditAppender;

  constructor(
    private readonly keys: SealKeys | undefined,
    redis: Redis | Cluster,
    prefix: string,
  ) {
    this.chain = new AuditAppender(redis, prefix, {
      ...(keys ? { sealer: keys } : {}),
      policyVersion: () => null,
    });
  }

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
    const details = `${what}: its seal does not check (written outside the bot, or under another SEAL_KEY), so it grants nothing`;
    await this.chain
      .append([
        standaloneEntry({ act: 'seal_invalid', actor: 'cloudops', details }, new Date().toISOString(), null),
      ])
      .catch(() => undefined);
    return false;
  }
}
