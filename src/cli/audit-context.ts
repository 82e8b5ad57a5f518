/** Who runs a CLI command and how its audit entries are sealed: the operator's side of the audit chain. */

import { readFileSync } from 'node:fs';
import { hostname, userInfo } from 'node:os';
import { policyVersionOf } from '../config/policy.ts';
import { sealKeysFrom } from '../config/seal-keys.ts';
import type { AuditContext } from '../requests/audit/append.ts';
import type { AuditRequester } from '../requests/model/audit-record.ts';
import type { CliIo } from './io.ts';

/** The operator as the audit records them: the OS user and host, and the name given with `--as`. */
export interface CliOperator {
  /** `cli:<name>@<host>`: `--as`'s name when given, else the OS user. */
  actor: string;
  requester: AuditRequester;
}

/** Who ran the command: the OS user and host (a container's `node` says little; `--as NAME` says who). */
export function cliOperator(as?: string): CliOperator {
  let user = 'unknown';
  try {
    user = userInfo().username;
  } catch {
    // No passwd entry (a container run with a numeric uid): the host and --as still say where and who.
  }
  const host = hostname();
  return {
    actor: `cli:${as ?? user}@${host}`,
    requester: { cli: { user, host, ...(as ? { as } : {}) } },
  };
}

/** The seal keys of SEAL_KEY (when set) and the version of POLICY_FILE (when it can be read). */
export function cliAuditContext(io: CliIo): AuditContext {
  const { SEAL_KEY, SEAL_KEY_PREVIOUS, POLICY_FILE } = io.env;
  let version: string | null = null;
  try {
    version = policyVersionOf(readFileSync(POLICY_FILE));
  } catch {
    // No policy file here: the entry says so with a null version.
  }
  return {
    ...(SEAL_KEY ? { sealer: sealKeysFrom(SEAL_KEY, SEAL_KEY_PREVIOUS) } : {}),
    policyVersion: () => version,
  };
}
