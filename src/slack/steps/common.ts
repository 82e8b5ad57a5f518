import type { AllMiddlewareArgs, App, SlackEventMiddlewareArgs } from '@slack/bolt';
import { findProject, type ProjectPolicy } from '../../config/policy.ts';
import type { Origin } from '../../requests/lifecycle/types.ts';
import type { CloudRequest } from '../../requests/model/types.ts';
import { knownVm } from '../../requests/vm-facts.ts';
import { parseVmid } from '../../rules/inputs.ts';
import type { Violation, VmKnown } from '../../rules/types.ts';
import { TicketError } from '../../tickets/errors.ts';
import { type SlackDeps, whereProjectLives } from '../deps.ts';

/** The callback ids of the two steps, as `functions` in the manifest names them. */
export const STEP_IDS = { resize: 'request_vm_resize', restore: 'request_vm_restore' } as const;

export type StepArgs = SlackEventMiddlewareArgs<'function_executed'> & AllMiddlewareArgs;

/** What every step asks for: who, where, which project and VM. */
export interface StepStart {
  origin: Origin;
  project: ProjectPolicy;
  vmid: number;
  vm: VmKnown;
  reason?: string;
}

/** The run's inputs; an event without them (`inputs: null`) reads as no inputs at all. */
export function stepInputs(args: Pick<StepArgs, 'inputs'>): Record<string, unknown> {
  const { inputs } = args as { inputs: unknown };
  return typeof inputs === 'object' && inputs !== null ? (inputs as Record<string, unknown>) : {};
}

/** An input as text, whatever type Workflow Builder sent it as; undefined when empty. */
export function input(inputs: Record<string, unknown>, name: string): string | undefined {
  const value = inputs[name];
  if (value === undefined || value === null) return undefined;
  const text = String(value).trim();
  return text === '' ? undefined : text;
}

/** A boolean input (Workflow Builder sends booleans; text "true" is accepted too). */
export function flag(inputs: Record<string, unknown>, name: string): boolean {
  const value = inputs[name];
  return value === true || value === 'true';
}

/** The rules' refusals as the one sentence a failed step shows. */
export function sentence(violations: Violation[]): string {
  return violations.map((v) => v.message).join(' ');
}

/** The refusal of a step whose requester is not the `user_context` Slack fills in from the workflow's user. */
export const NEEDS_USER_CONTEXT =
  'The step needs the requester as the person who runs the workflow (a user context), not a user id a builder chose.';

/**
 * The requester of a step run: the id of the `slack#/types/user_context` input, which Slack sets from the person who
 * ran the workflow (with a secret) and a builder cannot set by hand. A plain user id is refused: anyone could be typed.
 */
export function workflowUser(inputs: Record<string, unknown>): string | undefined {
  const context = inputs.requester;
  if (typeof context !== 'object' || context === null) return undefined;
  const { id, secret } = context as Record<string, unknown>;
  if (typeof secret !== 'string' || secret === '') return undefined;
  return typeof id === 'string' && /^[UW][A-Z0-9]+$/.test(id) ? id : undefined;
}

/** Reads the inputs both steps share; a sentence saying what is wrong when one breaks a rule. */
async function readStart(deps: SlackDeps, args: StepArgs, callbackId: string): Promise<StepStart | string> {
  const { event, body } = args;
  const inputs = stepInputs(args);
  const user = workflowUser(inputs);
  const channel = input(inputs, 'channel');
  if (!user) return NEEDS_USER_CONTEXT;
  if (!channel || !/^[CG][A-Z0-9]+$/.test(channel)) return 'The step needs the channel of the project.';
  const name = input(inputs, 'project') ?? '';
  const project = findProject(deps.policy, name);
  if (!project) return `There is no project “${name.slice(0, 64)}” in the policy.`;
  if (!project.channels.includes(channel)) return whereProjectLives(project);
  const vmid = parseVmid(input(inputs, 'vm_id') ?? '');
  if (typeof vmid !== 'number') return vmid.message;
  const vm = knownVm(
    project.vms.find((v) => v.vmid === vmid),
    await deps.vmFacts.get(project.uuid, vmid),
    vmid,
  );
  const teamId = typeof body.team_id === 'string' ? body.team_id : '';
  return {
    origin: {
      user,
      teamId,
      channel,
      workflowStep: { callbackId, executionId: event.function_execution_id },
    },
    project,
    vmid,
    vm,
    reason: input(inputs, 'reason'),
  };
}

/**
 * Registers a workflow step: Bolt acks the `function_executed` event at once; inputs that break a rule fail the step
 * then, with the rule's sentence; otherwise the step's token is kept and the request is made through the lifecycle,
 * and the step stays open until the request ends (the workers complete it). A delivery of the same run again makes
 * nothing new.
 */
export function registerStep(
  app: App,
  deps: SlackDeps,
  callbackId: string,
  make: (start: StepStart, inputs: Record<string, unknown>) => Promise<CloudRequest | string>,
): void {
  app.function(callbackId, async (args) => {
    const { event, fail } = args;
    const failWith = (error: string) =>
      fail({ error }).catch((err: unknown) => deps.logger.warn({ err, callbackId }, 'could not fail a step'));
    let start: StepStart | string;
    try {
      start = await readStart(deps, args, callbackId);
    } catch (error) {
      deps.logger.error({ err: error, callbackId }, 'a workflow step could not be read');
      return void (await failWith(
        'cloudops could not reach its database; nothing was asked. Run the step again.',
      ));
    }
    if (typeof start === 'string') return void (await failWith(start));
    // Kept before the request exists, so its end always finds it; a second delivery of this run stops here.
    const first = await deps.stepTokens.save(event.function_execution_id, event.bot_access_token);
    if (!first) return;
    try {
      const made = await make(start, stepInputs(args));
      if (typeof made === 'string') await failWith(made);
    } catch (error) {
      // A change ticket the policy requires: the step has no Ticket input, so it says so instead of asking anyway.
      if (error instanceof TicketError)
        return void (await failWith(`${error.reason} Use /cloud, which has a Ticket field.`));
      deps.logger.error({ err: error, callbackId }, 'a workflow step request could not be stored');
      await failWith('cloudops could not store the request; nothing was sent. Run the step again.');
    }
  });
}
