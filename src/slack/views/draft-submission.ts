import { randomUUID } from 'node:crypto';
import type { ViewOutput } from '@slack/bolt';
import type { ProjectPolicy } from '../../config/policy.ts';
import { ApprovalUnreachableError, RequesterRefusedError } from '../../requests/lifecycle/types.ts';
import type { RecordedVmFacts } from '../../requests/vm-facts.ts';
import type { Violation } from '../../rules/types.ts';
import { TicketError } from '../../tickets/errors.ts';
import { FIELDS } from '../blocks/modals.ts';
import { ackBudget, projectsForChannel, type SlackDeps, TRY_AGAIN } from '../deps.ts';
import type { Draft } from '../drafts.ts';
import { fieldErrors } from './form-values.ts';

export const STALE_FORM =
  'This form has expired or was already submitted. Close it and run the command again.';

/** Said when a form comes back with its sealed draft changed: nothing of it is used. */
export const TAMPERED_FORM =
  'This form came back changed from what the bot opened, so nothing of it is used. Close it and run the command again.';

/** Said when the same form is submitted again while its first submission is being stored. */
export const ALREADY_SUBMITTING = 'This form is being submitted already. Wait a moment.';

/** What a modal submission read before its ack, and its claim on the draft. */
export interface Submission {
  /** Redis did not answer within the ack's budget: answer "try again"; nothing was consumed. */
  unavailable: boolean;
  /** The draft, when it exists and belongs to the submitter. */
  draft?: Draft;
  /** Why there is no draft, as the submitter reads it (the form expired or was submitted, or came back changed). */
  refusal: string;
  /** False when another submission of the same form holds the draft. */
  claimed: boolean;
  /** What the bot recorded of the VM the form names. */
  recorded?: RecordedVmFacts;
  /** Further Redis calls before the ack: within what is left of the same budget. */
  within: <T>(promise: Promise<T>) => Promise<T>;
  /** The claim's token. */
  token: string;
}

/**
 * Reads the draft behind a modal (claiming it) and what the bot recorded of the VM the form names, in one round trip
 * within the ack's budget (docs/operations.md#deadlines: Slack's answer within 3 s whatever Redis does).
 */
export async function readSubmission(
  deps: SlackDeps,
  view: ViewOutput,
  user: string,
  vm: { project: ProjectPolicy | undefined; vmid: unknown },
): Promise<Submission> {
  const within = ackBudget();
  const token = randomUUID();
  const { project, vmid } = vm;
  try {
    const [claim, recorded] = await within(
      Promise.all([
        deps.drafts.claimAndGet(view.private_metadata, token),
        project && typeof vmid === 'number' ? deps.vmFacts.get(project.uuid, vmid) : undefined,
      ]),
    );
    const draft = claim.draft?.user === user ? claim.draft : undefined;
    const refusal = claim.refused === 'tampered' ? TAMPERED_FORM : STALE_FORM;
    return { unavailable: false, draft, refusal, claimed: claim.claimed, recorded, within, token };
  } catch {
    return { unavailable: true, refusal: TRY_AGAIN, claimed: false, within, token };
  }
}

/**
 * Why a resize or restore submission cannot go on, as the modal's field errors: Redis away, the form stale or being
 * submitted, a project this channel may not operate, a malformed VM id. Undefined when it can go on.
 */
export function submissionErrors(
  deps: SlackDeps,
  submission: Submission,
  vm: { project: ProjectPolicy | undefined; vmid: unknown },
  blocks: string[],
): Record<string, string> | undefined {
  const { draft } = submission;
  if (submission.unavailable) return { [FIELDS.project]: TRY_AGAIN };
  if (!draft) return { [FIELDS.project]: submission.refusal };
  if (!submission.claimed) return { [FIELDS.project]: ALREADY_SUBMITTING };
  if (!vm.project || !projectsForChannel(deps.policy, draft.channel).includes(vm.project))
    return { [FIELDS.project]: 'Choose one of the projects this channel may operate.' };
  if (typeof vm.vmid !== 'number') return fieldErrors([vm.vmid as Violation], blocks, FIELDS.vmid);
  return undefined;
}

/**
 * Gives the claim back after the ack, so a form answered with errors (or "try again") can be submitted again. Sent
 * on the connection that took it, it lands after the claim even when the claim's answer came too late.
 */
export function releaseClaim(deps: SlackDeps, view: ViewOutput, submission: Submission): void {
  void deps.drafts
    .release(view.private_metadata, submission.token)
    .catch((error: unknown) =>
      deps.logger.warn({ err: error }, 'draft claim not released; it expires on its own'),
    );
}

/**
 * After a submission's ack: stores the request and only then deletes the draft, so a submission that fails never
 * consumes it (the claim is given back). A failure is told to the submitter.
 */
export async function storeFromDraft(
  deps: SlackDeps,
  submission: Submission & { draft: Draft },
  user: string,
  what: string,
  store: () => Promise<unknown>,
): Promise<void> {
  const { draft, token } = submission;
  try {
    await store();
  } catch (error) {
    if (
      error instanceof ApprovalUnreachableError ||
      error instanceof RequesterRefusedError ||
      error instanceof TicketError
    ) {
      // Refused when made (its approvals could never come together, or the policy does not let this person ask
      // now): the form is done, the requester told why.
      await deps.drafts.take(draft.id).catch(() => undefined);
      await deps.slack.chat
        .postEphemeral({ channel: draft.channel, user, text: `:no_entry: ${error.message}` })
        .catch(() => undefined);
      return;
    }
    deps.logger.error({ err: error }, `${what} could not be stored`);
    await deps.drafts.release(draft.id, token).catch(() => undefined);
    await deps.slack.chat
      .postEphemeral({ channel: draft.channel, user, text: TRY_AGAIN })
      .catch(() => undefined);
    return;
  }
  await deps.drafts
    .take(draft.id)
    .catch((error: unknown) => deps.logger.warn({ err: error }, 'draft not removed; it expires on its own'));
}
