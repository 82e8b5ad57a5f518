import type { Job } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import type { CloudRequest } from '../requests/model/types.ts';
import type { RequestStore } from '../requests/store/store.ts';
import type { SlackApi } from '../slack-api/client.ts';
import { type FollowUpQueueDeps, slackCallFailed, startFollowUpQueue } from './follow-up-queue.ts';

export const STEPS_QUEUE = 'steps';
/** A step's token is kept until its request ends; no request waits longer than this (30 days of TTL, a schedule). */
const TOKEN_TTL_S = 45 * 24 * 3600;

/**
 * The token Slack sent with a workflow step run (`bot_access_token`), kept in Redis beside the request, by execution
 * id, until the step is completed: it survives restarts and is never logged or put in a job.
 */
export class StepTokens {
  constructor(
    private readonly redis: Redis | Cluster,
    private readonly prefix: string,
  ) {}

  private key(executionId: string): string {
    return `${this.prefix}:step-token:${executionId}`;
  }

  /** Keeps the token of a run; false when this run's token is kept already (Slack delivered the run again). */
  async save(executionId: string, token: string): Promise<boolean> {
    return (await this.redis.set(this.key(executionId), token, 'EX', TOKEN_TTL_S, 'NX')) === 'OK';
  }

  async get(executionId: string): Promise<string | undefined> {
    return (await this.redis.get(this.key(executionId))) ?? undefined;
  }

  async delete(executionId: string): Promise<void> {
    await this.redis.del(this.key(executionId));
  }
}

/** The outputs of the two steps (manifest `output_parameters`). */
export interface StepOutputs {
  request_id: string;
  state: string;
  task_id?: string;
}

/** How a step ends for a request in this state, or undefined while the request goes on. */
export type StepEnding = { ok: true; outputs: StepOutputs } | { ok: false; error: string };

/** Why a request ended without its change, in one sentence for the workflow's activity log. */
export function stepEnding(request: CloudRequest): StepEnding | undefined {
  const id = request.id;
  const last = request.outcomes[request.outcomes.length - 1];
  const nothing = 'Nothing was sent to the API.';
  switch (request.state) {
    case 'succeeded':
    case 'resolved_done': {
      const outputs: StepOutputs = { request_id: id, state: request.state };
      if (last?.taskId) outputs.task_id = last.taskId;
      return { ok: true, outputs };
    }
    case 'rejected':
      return {
        ok: false,
        error: `Request ${id} was rejected by ${request.rejectedBy ?? 'an approver'}${request.rejectReason ? `: ${request.rejectReason}` : ''}. ${nothing}`,
      };
    case 'expired':
      return { ok: false, error: `Request ${id} expired: nobody approved it in time. ${nothing}` };
    case 'cancelled':
      return {
        ok: false,
        error: `Request ${id} was cancelled by ${request.cancelledBy ?? 'cloudops'}. ${nothing}`,
      };
    case 'refused':
      return { ok: false, error: `The API refused request ${id}: ${last?.reason ?? 'no reason given.'}` };
    case 'unknown':
      return {
        ok: false,
        error: `Outcome unknown for request ${id}: ${last?.reason ?? 'no answer came back.'} It may have been applied and will not be sent again; check the portal.`,
      };
    case 'resolved_failed':
      return { ok: false, error: `Request ${id} was not applied (checked in the portal).` };
    default:
      return undefined;
  }
}

export interface StepCompletionDeps extends FollowUpQueueDeps {
  store: RequestStore;
  slack: Pick<SlackApi, 'functions'>;
}

export interface StepCompletion {
  /** `request` changed: a step waiting for it is completed once it has ended. */
  changed(request: CloudRequest): Promise<void>;
  close(): Promise<void>;
}

/**
 * Completes workflow steps when their requests end, possibly hours later and from any worker: a job per request
 * (fixed id, so many reports of the end make one) calls functions.completeSuccess or functions.completeError with
 * the step's own token, then forgets the token. Slack outages and rate limits are retried; a run Slack no longer
 * takes (completed, timed out) is given up.
 */
export function startStepCompletion(deps: StepCompletionDeps): StepCompletion {
  const tokens = new StepTokens(deps.connection, deps.prefix);

  async function complete(job: Job<{ requestId: string }>): Promise<string> {
    const request = await deps.store.get(job.data.requestId);
    const run = request?.workflowStep;
    const ending = request && stepEnding(request);
    if (!run || !ending) return 'not-ended';
    const token = await tokens.get(run.executionId);
    if (!token) return 'done';
    try {
      if (ending.ok) {
        await deps.slack.functions.completeSuccess({
          token,
          function_execution_id: run.executionId,
          outputs: { ...ending.outputs },
        });
      } else {
        await deps.slack.functions.completeError({
          token,
          function_execution_id: run.executionId,
          error: ending.error,
        });
      }
    } catch (error) {
      throw await slackCallFailed('functions.complete', error, async (label) => {
        // Slack no longer takes this run (completed, timed out, token gone): keeping the token serves nothing.
        deps.logger.warn({ requestId: request.id, error: label }, 'workflow step not completed');
        await tokens.delete(run.executionId);
      });
    }
    await tokens.delete(run.executionId);
    return ending.ok ? 'completed' : 'failed';
  }

  const queue = startFollowUpQueue<{ requestId: string }>(
    STEPS_QUEUE,
    deps,
    {
      jobs: {
        attempts: 30,
        removeOnComplete: { age: 24 * 3600, count: 1000 },
        removeOnFail: { age: 24 * 3600, count: 1000 },
      },
    },
    complete,
  );
  return {
    async changed(request) {
      if (!request.workflowStep || !stepEnding(request)) return;
      await queue.add({ requestId: request.id }, { jobId: `step.${request.id}` });
    },
    close: () => queue.close(),
  };
}
