import type { TicketSystemId } from '../config/policy.ts';

/** The change-ticket systems cloudops asks (docs/policy.md#change-tickets). */
export type TicketSystemName = TicketSystemId;

/** A ticket as its system answered: what a request stores and shows. */
export interface TicketFacts {
  system: TicketSystemName;
  /** The key or number, as the system spells it (e.g. `OPS-123`, `CHG0030001`). */
  key: string;
  /** Where a person opens it. */
  url: string;
  /** The state's display name, e.g. `Approved`, `Implement`. */
  state: string;
  /** ServiceNow's planned window (start_date, end_date) as ISO 8601 UTC; empty strings when unset. */
  window?: { start: string; end: string };
}

/** What a call may take, and whether the caller gave up. */
export interface TicketCallOptions {
  /** The whole call's deadline; the client's default when absent. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** A comment (Jira) or work note (ServiceNow): one line of text and, optionally, a link after it. */
export interface TicketNote {
  text: string;
  link?: { url: string; label: string };
}

/** One ticket system: read a ticket, leave a note on it, check the credentials. */
export interface TicketSystem {
  readonly name: TicketSystemName;
  /** Throws a {@link import('./errors.ts').TicketError} when the ticket cannot be read. */
  read(key: string, options?: TicketCallOptions): Promise<TicketFacts>;
  note(key: string, note: TicketNote, options?: TicketCallOptions): Promise<void>;
  /** A read that proves the credentials work (doctor): who they are, in words. */
  whoAmI(options?: TicketCallOptions): Promise<string>;
  close(): Promise<void>;
}
