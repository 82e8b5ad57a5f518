/**
 * Why a change ticket does not let a request go ahead, as classes matched with `instanceof`, each with a stable
 * `code`. `reason` is one clean sentence that names the ticket and why (its state, or its window's start and end), for
 * a field error or a thread reply; it never carries a credential or a raw body of the ticket system's answer.
 */
export abstract class TicketError extends Error {
  abstract readonly code: string;
  /** The ticket as typed (upper-cased), or as the system names it. */
  readonly ticket: string;
  readonly reason: string;

  constructor(ticket: string, reason: string, options: { cause?: unknown } = {}) {
    super(reason, { cause: options.cause });
    this.ticket = ticket;
    this.reason = reason;
  }
}

/** No ticket was given where the policy requires one. */
export class TicketRequiredError extends TicketError {
  override readonly name = 'TicketRequiredError';
  readonly code = 'TICKET_REQUIRED';
}

/** Not a key of the ticket system (a wrong shape, characters a query or a path would read), or not of the projects the policy names. */
export class TicketKeyError extends TicketError {
  override readonly name = 'TicketKeyError';
  readonly code = 'TICKET_KEY';
}

/** The ticket system has no such ticket (or does not let cloudops see it). */
export class TicketNotFoundError extends TicketError {
  override readonly name = 'TicketNotFoundError';
  readonly code = 'TICKET_NOT_FOUND';
}

/** The ticket's state is not one the policy's `states` allows. */
export class TicketStateError extends TicketError {
  override readonly name = 'TicketStateError';
  readonly code = 'TICKET_STATE';
  constructor(
    ticket: string,
    reason: string,
    /** The state's display name. */
    readonly state: string,
  ) {
    super(ticket, reason);
  }
}

/** The run time is outside the ticket's planned window (ServiceNow's start_date and end_date), or it has none. */
export class TicketWindowError extends TicketError {
  override readonly name = 'TicketWindowError';
  readonly code = 'TICKET_WINDOW';
  constructor(
    ticket: string,
    reason: string,
    readonly window: { start?: string; end?: string },
    /** The window has not begun yet (it may still come): a run may wait for it. */
    readonly opensAt?: Date,
  ) {
    super(ticket, reason);
  }
}

/**
 * The ticket system could not be asked: not reached, too slow, 5xx or 429, or an answer that is not its documented
 * JSON (an HTML page, a redirect, a body too large). Never a pass: the request is refused, or retried before a run.
 */
export class TicketUnreachableError extends TicketError {
  override readonly name = 'TicketUnreachableError';
  readonly code = 'TICKET_UNREACHABLE';
}

/** The ticket system refused cloudops's credentials (401, 403), or none are configured. */
export class TicketUnauthorisedError extends TicketError {
  override readonly name = 'TicketUnauthorisedError';
  readonly code = 'TICKET_UNAUTHORISED';
}
