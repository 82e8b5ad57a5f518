/**
 * A run that must wait before its POST (its change ticket cannot be read yet, a freeze holds it): the execute worker
 * puts it back to queued and its job looks again at `at`, without using an attempt. `holder` names what holds it in
 * the audit ("the change ticket", "the freeze").
 */
export class RunHoldError extends Error {
  override readonly name: string = 'RunHoldError';
  readonly code: string = 'RUN_HOLD';
  constructor(
    readonly at: Date,
    reason: string,
    readonly holder: string,
  ) {
    super(reason);
  }
}

/** A run a freeze window of the worker's policy holds, with no break glass: it waits for the window's end. */
export class FreezeHoldError extends RunHoldError {
  override readonly name = 'FreezeHoldError';
  override readonly code = 'FREEZE_HOLD';
  constructor(at: Date, reason: string) {
    super(at, reason, 'the freeze');
  }
}
