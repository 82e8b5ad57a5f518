import { findProject } from '../../config/policy.ts';
import { knownVm } from '../../requests/vm-facts.ts';
import { cleanReason, parseVmid, reasonProblem } from '../../rules/inputs.ts';
import { checkRestore } from '../../rules/restore.ts';
import { CONFIRM, FIELDS, VIEWS } from '../blocks/modals.ts';
import type { SlackDeps } from '../deps.ts';
import type { SlackRouter } from '../router.ts';
import { readSubmission, releaseClaim, storeFromDraft, submissionErrors } from './draft-submission.ts';
import { fieldErrors, inputBlockIds, readForm, text, ticked } from './form-values.ts';
import { formTicket } from './ticket-field.ts';

/** Handles the restore modal: typed VM id, stopped confirmation, slug shape and HA autostart as field errors. */
export function register(app: SlackRouter, deps: SlackDeps): void {
  app.view(VIEWS.restore, async ({ ack, body, view }) => {
    const form = readForm(view);
    const blocks = inputBlockIds(view);
    const projectName = text(form, FIELDS.project);
    const project = projectName ? findProject(deps.policy, projectName) : undefined;
    const vmid = parseVmid(text(form, FIELDS.vmid) ?? '');
    // One round trip before the ack, within its budget: the draft (claimed) and the VM's facts.
    const submission = await readSubmission(deps, view, body.user.id, { project, vmid });
    let storing = false;
    try {
      const { draft, recorded } = submission;
      const refused = submissionErrors(deps, submission, { project, vmid }, blocks);
      if (refused || !draft || !project || typeof vmid !== 'number')
        return void (await ack({ response_action: 'errors', errors: refused ?? {} }));
      const vm = knownVm(
        project.vms.find((v) => v.vmid === vmid),
        recorded,
        vmid,
      );
      const backupSlug = text(form, FIELDS.backupSlug) ?? '';
      const autostart = ticked(form, FIELDS.autostart, 'autostart');
      const violations = checkRestore({
        vm,
        vmid,
        typedVmid: text(form, FIELDS.typedVmid) ?? '',
        backupSlug,
        autostart,
        confirmedStopped: ticked(form, FIELDS.confirm, CONFIRM.stopped),
      });
      const typedReason = text(form, FIELDS.reason);
      const reasonError = reasonProblem(typedReason);
      if (reasonError)
        return void (await ack({ response_action: 'errors', errors: { [FIELDS.reason]: reasonError } }));
      const reason = typedReason === undefined ? undefined : cleanReason(typedReason);
      if (violations.length > 0) {
        return void (await ack({
          response_action: 'errors',
          errors: fieldErrors(violations, blocks, FIELDS.typedVmid),
        }));
      }
      const ticketed = await formTicket(deps, project, ['restore'], text(form, FIELDS.ticket), blocks);
      if ('errors' in ticketed)
        return void (await ack({ response_action: 'errors', errors: ticketed.errors }));
      await ack({ response_action: 'clear' });
      storing = true;
      await storeFromDraft(deps, { ...submission, draft }, body.user.id, 'restore request', () =>
        deps.requests.createRestore(
          { user: body.user.id, teamId: draft.teamId, channel: draft.channel },
          { project, vm, backupSlug, autostart, reason, ...ticketed },
        ),
      );
    } finally {
      // Anything but a stored request gives the claim back, so the same form can be submitted again.
      if (!storing) releaseClaim(deps, view, submission);
    }
  });
}
