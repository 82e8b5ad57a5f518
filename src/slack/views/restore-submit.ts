import { findProject } from '../../config/policy.ts';
import { parseVmid } from '../../rules/inputs.ts';
import { checkRestore } from '../../rules/restore.ts';
import type { VmKnown } from '../../rules/types.ts';
import { CONFIRM, FIELDS, VIEWS } from '../blocks/modals.ts';
import { projectsForChannel, type SlackDeps, TRY_AGAIN, withDeadline } from '../deps.ts';
import type { SlackRouter } from '../router.ts';
import { fieldErrors, inputBlockIds, readForm, text, ticked } from './form-values.ts';
import { draftFor, STALE_FORM } from './resize-submit.ts';

/** Handles the restore modal: typed VM id, stopped confirmation, slug shape and HA autostart as field errors. */
export function register(app: SlackRouter, deps: SlackDeps): void {
  app.view(VIEWS.restore, async ({ ack, body, view }) => {
    const draft = await draftFor(deps, view, body.user.id).catch(() => null);
    if (draft === null)
      return void (await ack({ response_action: 'errors', errors: { [FIELDS.project]: TRY_AGAIN } }));
    if (!draft)
      return void (await ack({ response_action: 'errors', errors: { [FIELDS.project]: STALE_FORM } }));
    const form = readForm(view);
    const blocks = inputBlockIds(view);
    const projectName = text(form, FIELDS.project);
    const project = projectName ? findProject(deps.policy, projectName) : undefined;
    if (!project || !projectsForChannel(deps.policy, draft.channel).includes(project)) {
      return void (await ack({
        response_action: 'errors',
        errors: { [FIELDS.project]: 'Choose one of the projects this channel may operate.' },
      }));
    }
    const vmid = parseVmid(text(form, FIELDS.vmid) ?? '');
    if (typeof vmid !== 'number') {
      return void (await ack({
        response_action: 'errors',
        errors: fieldErrors([vmid], blocks, FIELDS.vmid),
      }));
    }
    let vm: VmKnown;
    try {
      vm = await withDeadline(deps.vmFacts.known(project, vmid));
    } catch {
      return void (await ack({ response_action: 'errors', errors: { [FIELDS.project]: TRY_AGAIN } }));
    }
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
    if (violations.length > 0) {
      return void (await ack({
        response_action: 'errors',
        errors: fieldErrors(violations, blocks, FIELDS.typedVmid),
      }));
    }
    const taken = await withDeadline(deps.drafts.take(draft.id)).catch(() => false);
    if (!taken)
      return void (await ack({ response_action: 'errors', errors: { [FIELDS.project]: STALE_FORM } }));
    await ack({ response_action: 'clear' });
    try {
      await deps.requests.createRestore(
        { user: body.user.id, teamId: draft.teamId, channel: draft.channel },
        { project, vm, backupSlug, autostart, reason: text(form, FIELDS.reason) },
      );
    } catch (error) {
      deps.logger.error({ err: error }, 'restore request could not be stored');
      await deps.slack.chat
        .postEphemeral({ channel: draft.channel, user: body.user.id, text: TRY_AGAIN })
        .catch(() => undefined);
    }
  });
}
