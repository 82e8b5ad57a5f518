/**
 * An audit entry's shape (docs/operations.md#audit-entries): what the chain hashes, what the export ships and what
 * `cloudops audit --json` prints. The model underneath the store, the audit room and their readers.
 */

/** How an approver proved who they are, as the audit names it. */
export interface AuditApprover {
  user: string;
  method: 'slack' | 'passkey' | 'sso';
  /** The passkey's credential id (base64url). */
  credential?: string;
  /** The IdP's subject. */
  subject?: string;
  at: string;
}

/** Who asked: a person in Slack, an agent for a person, or an operator at the command line. */
export interface AuditRequester {
  slack?: string;
  name?: string;
  email?: string;
  agent?: string;
  on_behalf_of?: string;
  cli?: { user: string; host: string; as?: string };
}

/** One audit entry as it is hashed: everything but its stream id, hash and seal. */
export interface AuditBody {
  /** The request it belongs to; null for an entry of no request (a policy change, an agent disabled). */
  request_id: string | null;
  /** What happened: a request's new state, `created`, a note (`approval`, `reminder`, …) or `policy_changed`. */
  act: string;
  /** Who did it: a Slack user id, `agent:<name>`, `cli:<user>@<host>`, or `cloudops` for the bot itself. */
  actor: string;
  /** When, ISO 8601 in UTC. */
  time: string;
  details: string | null;
  /** The version of the policy the writing process held (12 hex digits), null when it was not known. */
  policy_version: string | null;
  project?: { name: string; id: string };
  vm?: number;
  /** Each field before → after, or the backup restored. */
  change?:
    | Record<string, { before: string | number | null; after: string | number | null }>
    | { backup: string; autostart: boolean };
  /** The monthly cost difference as an exact decimal, with its currency. */
  monthly_cost_delta?: { amount: string; currency: string } | null;
  rule?: string | null;
  approvals_needed?: number;
  approvers?: AuditApprover[];
  requester?: AuditRequester;
  ticket?: string | null;
  /** Frozen work run now by a break-glass user, and why; `verified` where it had to be (docs/approvals.md). */
  break_glass?: { by: string; reason: string; at: string; verified?: { method: string; subject: string } };
  /** The API's latest answer: its task id, or its status and reason. */
  outcome?: { task_id?: string; status?: number; answer?: string; not_sent?: boolean } | null;
  /** The hash of the entry before it; '' for the first entry of the chain. */
  prev: string;
}

/** A chained entry as `cloudops audit --json`, the export and `verify --file` see it. */
export interface AuditRecord extends AuditBody {
  /** The stream id: ordered, `<ms>-<seq>`; not part of the hash. */
  id: string;
  hash: string;
  /** Absent when no SEAL_KEY was set where it was written. */
  seal?: string;
}

/** Where the chain begins once retention trimmed it: the last entry removed, sealed. */
export interface AuditAnchor {
  id: string;
  hash: string;
  seal?: string;
}
