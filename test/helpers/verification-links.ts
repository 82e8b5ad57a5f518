import { randomBytes } from 'node:crypto';
import type { VerificationLinks, VerifiedApprover } from '../../src/requests/approval/verified-approval.ts';
import type { Decision } from '../../src/requests/model/decision.ts';
import type { BreakGlassClaims, VerifiedBy, VerifyClaims } from '../../src/requests/model/verification.ts';

/** One link the bot had issued: where it points, what it is for, and what it is bound to. */
export type IssuedLink =
  | { url: string; kind: 'approve'; claims: VerifyClaims }
  | { url: string; kind: 'break_glass'; claims: BreakGlassClaims };

/**
 * A thin stand-in for the verification page's link store (src/verify/ runs the real page): it issues single-use
 * links on `publicUrl` and, for a test, completes one as the page does once its person proved who they are, by
 * calling the bot's `approveVerified` (or `breakGlassVerified`) with the link's claims.
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
  /** The same for a break glass's claims. */
  replayBreakGlass(claims: BreakGlassClaims, by: VerifiedBy): Promise<Decision>;
}

export function testVerificationLinks(publicUrl: string): TestVerificationLinks {
  let approver: VerifiedApprover | undefined;
  const open = new Map<string, IssuedLink>();
  const issued: IssuedLink[] = [];
  const bot = () => {
    if (!approver) throw new Error('the bot did not take the links');
    return approver;
  };
  const issue = (link: Omit<IssuedLink, 'url'>) => {
    const token = randomBytes(16).toString('base64url');
    const made = { ...link, url: `${publicUrl}/verify/${token}` } as IssuedLink;
    open.set(token, made);
    issued.push(made);
    return Promise.resolve(made.url);
  };
  return {
    issued,
    factory(given) {
      approver = given;
      return {
        issue: (claims) => issue({ kind: 'approve', claims }),
        issueBreakGlass: (claims) => issue({ kind: 'break_glass', claims }),
      };
    },
    async complete(url, by) {
      const token = url.slice(url.lastIndexOf('/') + 1);
      const link = open.get(token);
      if (!link) return issued.some((l) => l.url === url) ? 'used' : 'unknown';
      open.delete(token);
      return link.kind === 'approve'
        ? bot().approveVerified(link.claims, by)
        : bot().breakGlassVerified(link.claims, by);
    },
    replay: (claims, by) => bot().approveVerified(claims, by),
    replayBreakGlass: (claims, by) => bot().breakGlassVerified(claims, by),
  };
}
