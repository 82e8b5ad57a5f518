import { randomBytes } from 'node:crypto';
import type { VerificationLinks, VerifiedApprover } from '../../src/requests/approval/verified-approval.ts';
import type { Decision } from '../../src/requests/model/decision.ts';
import type { VerifiedBy, VerifyClaims } from '../../src/requests/model/verification.ts';

/** One link the bot had issued: where it points, and what it is bound to. */
export interface IssuedLink {
  url: string;
  claims: VerifyClaims;
}

/**
 * A thin stand-in for the verification page's link store (src/verify/ runs the real page): it issues single-use
 * links on `publicUrl` and, for a test, completes one as the page does once the approver proved who they are, by
 * calling the bot's `approveVerified` with the link's claims.
 */
export interface TestVerificationLinks {
  /** For `startOptions.verificationLinks`. */
  factory: (approver: VerifiedApprover) => VerificationLinks;
  /** Every link issued, oldest first. */
  issued: IssuedLink[];
  /** Completes the link at `url` with `by`; a link works once (a second use is refused without a call). */
  complete(url: string, by: VerifiedBy): Promise<Decision | 'used' | 'unknown'>;
  /** Hands the bot these claims again, past the link store: what the lifecycle alone does with a replay. */
  replay(claims: VerifyClaims, by: VerifiedBy): Promise<Decision>;
}

export function testVerificationLinks(publicUrl: string): TestVerificationLinks {
  let approver: VerifiedApprover | undefined;
  const open = new Map<string, VerifyClaims>();
  const issued: IssuedLink[] = [];
  return {
    issued,
    factory(given) {
      approver = given;
      return {
        async issue(claims) {
          const token = randomBytes(16).toString('base64url');
          const url = `${publicUrl}/verify/${token}`;
          open.set(token, claims);
          issued.push({ url, claims });
          return url;
        },
      };
    },
    async complete(url, by) {
      const token = url.slice(url.lastIndexOf('/') + 1);
      const claims = open.get(token);
      if (!claims) return issued.some((l) => l.url === url) ? 'used' : 'unknown';
      open.delete(token);
      if (!approver) throw new Error('the bot did not take the links');
      return approver.approveVerified(claims, by);
    },
    replay(claims, by) {
      if (!approver) throw new Error('the bot did not take the links');
      return approver.approveVerified(claims, by);
    },
  };
}
