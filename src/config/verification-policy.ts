import { z } from 'zod';
import { nouns } from './policy-problems.ts';

/** The methods a policy may name, in the order the verification page offers them. */
export const VERIFY_METHOD_NAMES = ['passkey', 'sso'] as const;

/**
 * How an approver may prove who they are (see requests/model/verification.ts). Named here, below requests/, because the
 * policy file names them; the lifecycle takes the type from here.
 */
export type VerifyMethod = (typeof VERIFY_METHOD_NAMES)[number];

const method = z.enum(VERIFY_METHOD_NAMES, {
  message: `expected a verification method: ${VERIFY_METHOD_NAMES.join(', ')}`,
});

/**
 * `verify:` of an `approvals:` block, a rule or an agent: `passkey`, `sso`, or a list of both (either one satisfies
 * it), read as a list without repeats (docs/policy.md#verified-approvals).
 */
export const verifySchema = z
  .union([method.transform((m) => [m]), z.array(method).min(1)])
  .meta(nouns('passkey, sso or a list of both', 'verification methods'))
  .transform((methods): VerifyMethod[] => VERIFY_METHOD_NAMES.filter((m) => methods.includes(m)));
