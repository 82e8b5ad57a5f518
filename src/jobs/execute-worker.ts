import { setTimeout as sleep } from 'node:timers/promises';
import { DelayedError, type Job, UnrecoverableError } from 'bullmq';
import { CloudApiError, CloudRefusedError, isSurelyNotApplied } from '../cloud/errors.ts';
import { endReturnedLease, leaseItem, openLease } from '../requests/leases.ts';
import {
  beforeResume,
  beforeSend,
  holdRun,
  recordStep,
  requeueNotSent,
  settleEnded,
  settleSucceeded,
  startSending,
} from '../requests/lifecycle/run-moves.ts';
import { lockAndStart } from '../requests/lifecycle/run-start.ts';
import { RunHoldError } from '../requests/model/run-hold.ts';
import type { CloudRequest, ReplyEvent, StepOutcome } from '../requests/model/types.ts';
import { knownForRequest, type RecordedVmFacts, type VmFactsWrite } from '../requests/vm-facts.ts';
import type { ResizeTarget, VmKnown } from '../rules/types.ts';
import type { ExecutionDeps } from './deps.ts';
import { type ExecuteJobData, enqueueNotify } from './queues.ts';
import { NotReplicatedError } from './replica-ack.ts';
import { resizeBody, UnmappedFieldError } from './resize-body.ts';
import type { LockPolicy } from './retry-policy.ts';
import { MARKER_TTL_S, type SendMarkers } from './send-markers.ts';
import { type ConfirmAndSet, type HeldLock, LockLostError, type VmLock } from './vm-lock.ts';

/** How an execute job ended, for metrics.jobs and the job's return value. */
export type ExecuteOutcome = 'succeeded' | 'refused' | 'unknown' | 'skipped' | 'missing';

/** Said when a retried or restarted job finds its step marked as possibly sent. */
const INTERRUPTED_REASON =
  'The worker stopped while this call was in flight (a restart or crash), so whether the API applied it is not known.';
/** Said when a shutdown could not wait for the API's answer any longer (docs/operations.md#shutdown: SIGTERM ends within 20 s). */
export const SHUTDOWN_REASON =
  'The bot was stopping and could not wait any longer for the API to answer this call, so whether the API applied it is not known.';
/** Said when the API is unreachable or busy for longer than the job's attempts. */
const GAVE_UP_REASON = (reason: string) =>
  `The API could not take the call after several tries (${reason}). Nothing was applied; make a new request to try again.`;

/**
 * A request's run: one VM at a time, at most one POST per step, and each outcome decided once where it is caught
 * rather than retried blindly. Slack is never called here: replies go through the notify queue. What is BullMQ's
 * (the job, the VM's lock, the delay) and the call through cloud/ are here; every change of the request's state is
 * the lifecycle's (requests/lifecycle/run-moves.ts, run-start.ts), asked with what this job holds.
 */
export class ExecuteProcessor {
  constructor(
    private readonly deps: ExecutionDeps,
    private readonly lock: VmLock,
    private readonly lockPolicy: LockPolicy,
    private readonly markers: SendMarkers,
    /** Aborted when a shutdown abandons the calls still in flight; each then ends as 'unknown'. */
    private readonly abandon?: AbortSignal,
  ) {}

  /** What the lock's script needs ({@link lockAndStart}). */
  private get parts() {
    return {
      lock: this.lock,
      markers: this.markers,
      markerTtlS: MARKER_TTL_S,
      vmFacts: this.deps.vmFacts,
      prefix: this.deps.prefix,
      store: this.deps.store,
    };
  }

  /** The BullMQ processor. */
  async process(job: Job<ExecuteJobData>, token?: string): Promise<ExecuteOutcome> {
    // The lock comes first; the request and the VM's facts are read once, by the same script, under it (jobs without
    // `vm` in their data read the request for the VM). For a plain run the script also moves it to sending and marks
    // its first step (requests/lifecycle/run-start.ts).
    const vm = job.data.vm ?? (await this.deps.store.get(job.data.requestId));
    if (!vm) return 'missing';
    const start = (copy?: CloudRequest) =>
      lockAndStart(this.parts, vm, job.data.requestId, this.deps.now(), copy);
    // The first try predicts the move from the job's copy (its entry chained ahead); a poll for a busy lock does not,
    // so it never leaves the process's writers chained after an entry that did not land.
    let taken = await start(job.data.request);
    // A VM's mutations are short: polling a moment takes the lock as soon as it frees, where putting the job back
    // (several Redis writes, then a long wait) made busy VMs sit idle between their jobs.
    const holdOnUntil = Date.now() + this.lockPolicy.holdOnMs;
    while (!taken && Date.now() < holdOnUntil) {
      await sleep(this.lockPolicy.pollMs);
      taken = await start();
    }
    if (!taken) {
      // Another job is still changing this VM: come back later without using up an attempt.
      await job.moveToDelayed(Date.now() + this.lockPolicy.waitMs, token);
      throw new DelayedError();
    }
    const held = taken.lock;
    try {
      return await this.run(job, taken.request, vm, held, taken.recorded, taken.started);
    } catch (error) {
      if (error instanceof RunHoldError) {
        await job.moveToDelayed(
          Date.now() + Math.max(0, error.at.getTime() - this.deps.now().getTime()),
          token,
        );
        throw new DelayedError();
      }
      if (!(error instanceof LockLostError || error instanceof NotReplicatedError)) throw error;
      // Nothing was sent and no marker left: the next run continues from the same step.
      await job.moveToDelayed(Date.now() + this.lockPolicy.waitMs, token);
      throw new DelayedError();
    } finally {
      // Not awaited: the release goes out in the same write as BullMQ's completion of the job, and before it. A
      // release that fails is only logged either way; the lock's TTL frees it.
      void held
        .release()
        .catch((error: unknown) => this.deps.logger.warn({ err: error }, 'vm lock release failed'));
    }
  }

  private async run(
    job: Job<ExecuteJobData>,
    read: CloudRequest | undefined,
    locked: { projectUuid: string; vmid: number },
    held: HeldLock,
    /** What the bot recorded for the locked VM, read with the lock: it changes only under the lock. */
    recorded: RecordedVmFacts | undefined,
    /** The lock's script moved the request to sending and marked its first step (a plain run). */
    started: boolean,
  ): Promise<ExecuteOutcome> {
    if (!read) return 'missing';
    let request = read;
    const id = request.id;
    if (
      request.projectUuid.toLowerCase() !== locked.projectUuid.toLowerCase() ||
      request.vmid !== locked.vmid
    ) {
      // The job names another VM than its request: never change a VM whose lock is not held.
      throw new UnrecoverableError(`execute job ${job.id} does not name the VM of request ${id}`);
    }
    // What is known of the VM until a step of this run changes it.
    const known: VmKnown | undefined = knownForRequest(this.deps.policy, request, recorded);
    /** The first step's marker, when it was set together with the move to sending. */
    let firstMark: Promise<ConfirmAndSet> | undefined;
    if (started) {
      const refused = await beforeSend(this.deps, request, known).catch((error: unknown) =>
        this.heldBack(request, error),
      );
      const first = stepsOf(request)[request.nextStep];
      if (refused || (first && typeof this.bodyOf(first) === 'string')) {
        // Nothing is sent: the marker the script set goes, so it guards no step that never left.
        await this.markers.clear(id, request.nextStep);
        if (refused) return this.finishStep(request, request.nextStep, 'refused', refused, undefined, true);
        // A step the policy cannot map is refused in the loop below, with the mapping's reason.
      } else {
        firstMark = Promise.resolve('set');
      }
    } else if (request.state === 'queued') {
      const sending = await this.startQueued(request, known, held);
      if (typeof sending === 'string') return sending;
      request = sending.request;
      firstMark = sending.firstMark;
    } else if (request.state === 'sending') {
      // Resumed (a worker stopped between steps, or the request was put in sending in Redis): judged again.
      const refused = await beforeResume(this.deps, request);
      if (refused) {
        const step = request.nextStep;
        // A step whose POST may have left is the interrupted run's to report (unknown), not a refusal.
        if (await this.markers.exists(id, step)) return this.unknown(request, step, INTERRUPTED_REASON);
        return this.finishStep(request, step, 'refused', refused, undefined, step === 0);
      }
    } else {
      await this.reannounce(request);
      return 'skipped';
    }

    return this.runSteps(job, request, held, known, firstMark);
  }

  /** A queued run moves to sending (or ends refused) under the lock it took: its own step, apart from the entry. */
  private async startQueued(
    request: CloudRequest,
    known: VmKnown,
    held: HeldLock,
  ): Promise<ExecuteOutcome | { request: CloudRequest; firstMark: Promise<ConfirmAndSet> | undefined }> {
    const id = request.id;
    let firstMark: Promise<ConfirmAndSet> | undefined;
    const refused = await beforeSend(this.deps, request, known);
    const first = stepsOf(request)[request.nextStep];
    const willSend = refused === undefined && (first === undefined || typeof this.bodyOf(first) !== 'string');
    // The request as read under the lock: the compare-and-set is the first round trip.
    const moving = startSending(this.deps, request, refused);
    // A run that will send marks its first step in the same round trip, right after the move to sending (so a crash
    // between the two never leaves a marker on a request still queued); nothing is sent before both answered.
    if (willSend) {
      firstMark = this.markers.markHolding(held, id, request.nextStep, this.deps.now());
      // Awaited below, or dropped when the move failed: never an unhandled rejection.
      firstMark.catch(() => undefined);
    }
    const sending = await moving;
    if (!sending.ok) {
      // Not sent: a marker set meanwhile only guards a step of a request that has moved on.
      return 'skipped';
    }
    if (refused !== undefined)
      return this.finishStep(sending.request, sending.request.nextStep, 'refused', refused, undefined, true);
    return { request: sending.request, firstMark };
  }

  /** The steps in order, each sent at most once under the lock: apart from the entry, which only decides the start. */
  private async runSteps(
    job: Job<ExecuteJobData>,
    sending: CloudRequest,
    held: HeldLock,
    knownAtStart: VmKnown | undefined,
    /** The first step's marker, when the entry set it. */
    markedFirst: Promise<ConfirmAndSet> | undefined,
  ): Promise<ExecuteOutcome> {
    let request = sending;
    const id = request.id;
    let known = knownAtStart;
    let firstMark = markedFirst;
    const steps = stepsOf(request);
    for (let step = request.nextStep; step < steps.length; step++) {
      const target = steps[step];
      const body = target ? this.bodyOf(target) : undefined;
      if (typeof body === 'string') return this.refuse(request, step, body);
      // The lock may have expired while this process stalled: never send without it (checked with the marker).
      // A later step reads the VM's facts again, in the same round trip as its marker: an earlier one changed them.
      const [before, marked] = await Promise.all([
        target ? (known ?? this.vmBefore(request)) : undefined,
        firstMark ?? this.markers.markHolding(held, id, step, this.deps.now()),
      ]);
      firstMark = undefined;
      if (marked === 'lost') throw new LockLostError(`lost the lock of VM ${request.vmid}`);
      if (marked === 'exists') return this.unknown(request, step, INTERRUPTED_REASON);
      await this.markerReplicated(id, step);

      let outcome: StepOutcome;
      try {
        outcome = await this.call(request, step, body);
      } catch (error) {
        return this.failed(job, request, step, error);
      }
      // What the step applied is recorded in the same write as the step's outcome.
      const vmFacts =
        target && before
          ? this.deps.vmFacts.stepWrite(request, target, before, new Date(outcome.at))
          : undefined;
      known = undefined;
      if (step + 1 < steps.length) {
        const updated = await recordStep(this.deps, request, outcome, vmFacts);
        if (!updated) {
          await this.recordAnyway(vmFacts);
          return 'missing';
        }
        request = updated;
        await this.announce(request, 'step_succeeded', step);
        continue;
      }
      // A temporary increase opens its lease in the same write as the success (retention then keeps the request);
      // its offer is a due time, set first: a due time without a lease finds nothing to do.
      const opened = openLease(request, new Date(outcome.at));
      if (opened) await this.deps.queues.due.set(leaseItem(id), opened.offerAt);
      const done = await settleSucceeded(this.deps, request, outcome, vmFacts, opened?.lease);
      if (!done.ok) {
        await this.recordAnyway(vmFacts);
        return 'skipped';
      }
      await this.announce(done.request, 'succeeded');
      await this.endReturnedLease(done.request);
      return 'succeeded';
    }
    return 'skipped';
  }

  /**
   * With Sentinels the marker must be on a replica before the POST leaves: a master lost after it (a crash, or the
   * moment an old master still takes writes during a failover) would come back without it, and the step would be
   * sent again. When no replica confirms, the marker goes and nothing is sent ({@link NotReplicatedError}).
   */
  private async markerReplicated(id: string, step: number): Promise<void> {
    try {
      await this.deps.replicaAck?.confirm();
    } catch (error) {
      if (error instanceof NotReplicatedError) await this.markers.clear(id, step);
      throw error;
    }
  }

  /** The API body of a resize step, or why the policy cannot map it (the step is refused, nothing sent). */
  private bodyOf(target: ResizeTarget): Record<string, string | number> | string {
    try {
      return resizeBody(target, this.deps.policy.resize_fields);
    } catch (error) {
      if (error instanceof UnmappedFieldError) return error.message;
      throw error;
    }
  }

  /** The API applied a step whose request could not be written (gone, or moved on): its VM facts are still true. */
  private async recordAnyway(vmFacts: VmFactsWrite | undefined): Promise<void> {
    if (vmFacts) await this.deps.vmFacts.write(vmFacts);
  }

  /** One API call; the answer becomes the step's outcome. */
  private async call(
    request: CloudRequest,
    step: number,
    body: Record<string, string | number> | undefined,
  ): Promise<StepOutcome> {
    const { cloud } = this.deps;
    const options = { signal: this.abandon };
    if (request.params.kind === 'restore') {
      const result = await cloud.restore(
        request.projectUuid,
        request.vmid,
        request.params.backupSlug,
        { autostart: request.params.autostart },
        options,
      );
      return { step, status: result.status, message: result.message, taskId: result.taskId, at: this.at() };
    }
    const result = await cloud.resize(request.projectUuid, request.vmid, body ?? {}, options);
    return { step, status: result.status, message: result.message, at: this.at() };
  }

  /** Decides, once, what a failed call means: retry (surely not sent), refused, or unknown. */
  private async failed(job: Job<ExecuteJobData>, request: CloudRequest, step: number, error: unknown) {
    const { logger } = this.deps;
    if (isSurelyNotApplied(error)) {
      await this.markers.clear(request.id, step);
      const attemptsLeft = (job.opts.attempts ?? 1) - job.attemptsMade - 1;
      if (attemptsLeft <= 0) return this.refuse(request, step, GAVE_UP_REASON(error.reason), error.status);
      const back = await requeueNotSent(this.deps, request, error.reason);
      if (!back.ok) return 'skipped';
      logger.info(
        { requestId: request.id, step, code: error.code },
        'api call surely not applied; retrying later',
      );
      // The queue's backoff strategy reads retryAfterMs from this error.
      throw error;
    }
    if (error instanceof CloudRefusedError) return this.refuse(request, step, error.reason, error.status);
    const reason = this.abandon?.aborted
      ? SHUTDOWN_REASON
      : error instanceof CloudApiError
        ? error.reason
        : 'An unexpected error happened while the call was being made.';
    if (!(error instanceof CloudApiError))
      logger.error({ err: error, requestId: request.id }, 'unexpected error during api call');
    return this.unknown(request, step, reason, error instanceof CloudApiError ? error.status : undefined);
  }

  private refuse(
    request: CloudRequest,
    step: number,
    reason: string,
    status?: number,
  ): Promise<ExecuteOutcome> {
    return this.finishStep(request, step, 'refused', reason, status);
  }

  private unknown(
    request: CloudRequest,
    step: number,
    reason: string,
    status?: number,
  ): Promise<ExecuteOutcome> {
    return this.finishStep(request, step, 'unknown', reason, status);
  }

  /** Ends a sending request without success: the step's outcome, the state, its audit entry and the report. */
  private async finishStep(
    request: CloudRequest,
    step: number,
    to: 'refused' | 'unknown',
    reason: string,
    status?: number,
    /** Refused by the re-check before anything was sent. */
    notSent?: boolean,
  ): Promise<ExecuteOutcome> {
    const outcome: StepOutcome = { step, status, reason, at: this.at(), ...(notSent ? { notSent } : {}) };
    const finished = await settleEnded(this.deps, request, to, outcome, reason);
    if (!finished.ok) return 'skipped';
    await this.announce(finished.request, to);
    return to;
  }

  /** What is known of the VM now: the policy's facts overlaid with what the bot applied. */
  private vmBefore(request: CloudRequest) {
    return this.deps.vmFacts.knownFor(this.deps.policy, request);
  }

  /** Message sync and thread reply, as one notify job (its reply is posted at most once). */
  private async announce(request: CloudRequest, event: ReplyEvent, step?: number): Promise<void> {
    await enqueueNotify(this.deps.queues, { type: 'report', requestId: request.id, event, step });
    if (request.ticket && ['succeeded', 'refused', 'unknown'].includes(event))
      await enqueueNotify(this.deps.queues, { type: 'ticket-note', requestId: request.id });
  }

  /** A started run a freeze or its change ticket holds goes back to queued, its first marker cleared; the job waits. */
  private async heldBack(request: CloudRequest, error: unknown): Promise<never> {
    if (error instanceof RunHoldError) {
      await this.markers.clear(request.id, request.nextStep);
      await holdRun(this.deps, request, error);
    }
    throw error;
  }

  private async reannounce(request: CloudRequest): Promise<void> {
    if (request.state === 'succeeded' || request.state === 'refused' || request.state === 'unknown') {
      await this.announce(request, request.state);
    }
    if (request.state === 'succeeded') await this.endReturnedLease(request);
  }

  /** A return request succeeded: the lease it returns ends ({@link endReturnedLease}). */
  private async endReturnedLease(request: CloudRequest): Promise<void> {
    const at = new Date(request.outcomes[request.outcomes.length - 1]?.at ?? request.updatedAt);
    await endReturnedLease(
      {
        store: this.deps.store,
        dropDue: (items) => this.deps.queues.due.drop(items),
        announce: (r, event) => this.announce(r, event),
      },
      request,
      at,
    );
  }

  private at(): string {
    return this.deps.now().toISOString();
  }
}

/** The calls a request makes: its resize steps, or one restore (no body). */
function stepsOf(request: CloudRequest): (ResizeTarget | undefined)[] {
  return request.params.kind === 'resize' ? request.params.steps : [undefined];
}
