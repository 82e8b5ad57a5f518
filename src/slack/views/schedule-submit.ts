import { findProject } from '../../config/policy.ts';
import { checkResizeUnder } from '../../requests/resize-check.ts';
import { resizeKinds } from '../../requests/tickets.ts';
import type { VmKnown } from '../../rules/types.ts';
import { VIEWS } from '../blocks/modals.ts';
import { projectsForChannel, type SlackDeps, TRY_AGAIN } from '../deps.ts';
import type { SlackRouter } from '../router.ts';
import {
  ALREADY_SUBMITTING,
  readSubmission,
  releaseClaim,
  STALE_FORM,
  storeFromDraft,
} from './draft-submission.ts';
import { formTicket } from './ticket-field.ts';

/**
 * The requester accepted the earliest allowed time: re-check as of then and store a scheduled request (a lease's
 * return when the form was opened from one).
 */
export function register(app: SlackRouter, deps: SlackDeps): void {
  app.view(VIEWS.schedule, async ({ ack, body, view }) => {
    // The draft (claimed) first, then the VM's facts it names, within one budget before the ack.
    const submission = await readSubmission(deps, view, body.user.id, {
      project: undefined,
      vmid: undefined,
    });
    let storing = false;
    try {
      if (submission.unavailable)
        return void (await ack({ response_action: 'update', view: notice(TRY_AGAIN) }));
      const { draft } = submission;
      const scheduled = draft?.scheduled;
      const project = scheduled ? findProject(deps.policy, scheduled.projectName) : undefined;
      if (
        !draft ||
        !scheduled ||
        !project ||
        !projectsForChannel(deps.policy, draft.channel).includes(project)
      ) {
        return void (await ack({
          response_action: 'update',
          view: notice(draft ? STALE_FORM : submission.refusal),
        }));
      }
      if (!submission.claimed)
        return void (await ack({ response_action: 'update', view: notice(ALREADY_SUBMITTING) }));
      const runAt = new Date(scheduled.runAt);
      let vm: VmKnown;
      try {
        vm = await submission.within(deps.vmFacts.known(project, scheduled.vmid));
      } catch {
        return void (await ack({ response_action: 'update', view: notice(TRY_AGAIN) }));
      }
      // Checked as of runAt: the 24-hour rule passes then, and anything else must pass too.
      const check = checkResizeUnder(deps.policy, {
        vm,
        target: scheduled.target,
        confirmedStopped: scheduled.confirmedStopped,
        acceptWanTwoStep: scheduled.acceptWanTwoStep,
        now: runAt,
      });
      if (check.violations.length > 0) {
        return void (await ack({
          response_action: 'update',
          view: notice(`It would still be refused then: ${check.violations.map((v) => v.message).join(' ')}`),
        }));
      }
      const ticketed = await formTicket(
        deps,
        project,
        resizeKinds(vm, scheduled.target),
        scheduled.ticket,
        [],
        runAt,
      );
      if ('errors' in ticketed)
        return void (await ack({
          response_action: 'update',
          view: notice(`The change ticket refuses it: ${Object.values(ticketed.errors).join(' ')}`),
        }));
      await ack({ response_action: 'clear' });
      storing = true;
      await storeFromDraft(deps, { ...submission, draft }, body.user.id, 'scheduled resize', () =>
        deps.requests.createResize(
          { user: body.user.id, teamId: draft.teamId, channel: draft.channel },
          {
            project,
            vm,
            target: scheduled.target,
            check,
            confirmedStopped: scheduled.confirmedStopped,
            reason: scheduled.reason,
            runAt,
            // A lease's return scheduled for the 24-hour rule stays that lease's return (it ends the lease when run).
            ...(draft.leaseReturn ? { returnOf: draft.leaseReturn } : {}),
            ...ticketed,
          },
        ),
      );
    } finally {
      // Anything but a stored request gives the claim back.
      if (!storing) releaseClaim(deps, view, submission);
    }
  });
}

function notice(message: string) {
  return {
    type: 'modal' as const,
    title: { type: 'plain_text' as const, text: 'Not scheduled' },
    close: { type: 'plain_text' as const, text: 'Close' },
    blocks: [{ type: 'section' as const, text: { type: 'mrkdwn' as const, text: message.slice(0, 3000) } }],
  };
}
