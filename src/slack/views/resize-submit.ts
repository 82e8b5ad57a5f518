import type { ViewOutput } from '@slack/bolt';
import { findProject } from '../../config/policy.ts';
import { checkResizeUnder } from '../../requests/resize-check.ts';
import { parseVmid, parseWholeNumber } from '../../rules/inputs.ts';
import type { CpuClass, OnOff, ResizeTarget, Violation, VmKnown, WanMode } from '../../rules/types.ts';
import { CONFIRM, FIELDS, scheduleModal, VIEWS } from '../blocks/modals.ts';
import { projectsForChannel, type SlackDeps, TRY_AGAIN, withDeadline } from '../deps.ts';
import type { Draft } from '../drafts.ts';
import type { SlackRouter } from '../router.ts';
import { fieldErrors, inputBlockIds, readForm, text, ticked } from './form-values.ts';

/**
 * A scheduled downsize runs this long after the exact end of the 24-hour wait, on a whole minute: the API's clock
 * may be a little behind ours, and the time shown then matches the rule's "from HH:MM" (rounded up).
 */
export const SCHEDULE_MARGIN_MS = 60_000;

/** The time a downsize allowed from `earliest` is scheduled for. */
export function scheduledRunAt(earliest: Date): Date {
  return new Date(Math.ceil(earliest.getTime() / 60_000) * 60_000 + SCHEDULE_MARGIN_MS);
}

export const STALE_FORM =
  'This form has expired or was already submitted. Close it and run the command again.';

/** Loads the draft behind a modal and checks it belongs to the person submitting. */
export async function draftFor(deps: SlackDeps, view: ViewOutput, user: string): Promise<Draft | undefined> {
  const draft = await withDeadline(deps.drafts.get(view.private_metadata));
  return draft && draft.user === user ? draft : undefined;
}

function optionalNumber(
  raw: string | undefined,
  field: 'cores' | 'ramGb' | 'osDiskGb',
  limit: number,
  violations: Violation[],
): number | undefined {
  if (raw === undefined) return undefined;
  const parsed = parseWholeNumber(raw, field, limit);
  if (typeof parsed === 'number') return parsed;
  violations.push(parsed);
  return undefined;
}

/** Handles the resize modal: rules as field errors, the 24-hour offer as a pushed view, else a request. */
export function register(app: SlackRouter, deps: SlackDeps): void {
  app.view(VIEWS.resize, async ({ ack, body, view }) => {
    let draft: Draft | undefined;
    try {
      draft = await draftFor(deps, view, body.user.id);
    } catch {
      return void (await ack({ response_action: 'errors', errors: { [FIELDS.project]: TRY_AGAIN } }));
    }
    if (!draft)
      return void (await ack({ response_action: 'errors', errors: { [FIELDS.project]: STALE_FORM } }));

    const form = readForm(view);
    const blocks = inputBlockIds(view);
    const violations: Violation[] = [];
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
    const limits = deps.policy.limits;
    const target: ResizeTarget = {
      cores: optionalNumber(text(form, FIELDS.cores), 'cores', limits.cores, violations),
      ramGb: optionalNumber(text(form, FIELDS.ramGb), 'ramGb', limits.ram_gb, violations),
      osDiskGb: optionalNumber(text(form, FIELDS.osDiskGb), 'osDiskGb', limits.os_disk_gb, violations),
      cpuClass: text(form, FIELDS.cpuClass) as CpuClass | undefined,
      wanMode: text(form, FIELDS.wanMode) as WanMode | undefined,
      privateNetwork: text(form, FIELDS.privateNetwork) as OnOff | undefined,
    };
    for (const key of Object.keys(target) as (keyof ResizeTarget)[]) {
      if (target[key] === undefined) delete target[key];
    }
    if (violations.length > 0) {
      return void (await ack({
        response_action: 'errors',
        errors: fieldErrors(violations, blocks, FIELDS.cores),
      }));
    }

    let vm: VmKnown;
    try {
      vm = await withDeadline(deps.vmFacts.known(project, vmid));
    } catch {
      return void (await ack({ response_action: 'errors', errors: { [FIELDS.project]: TRY_AGAIN } }));
    }
    const confirmedStopped = ticked(form, FIELDS.confirm, CONFIRM.stopped);
    const acceptWanTwoStep = ticked(form, FIELDS.confirm, CONFIRM.wanTwoStep);
    const check = checkResizeUnder(deps.policy, {
      vm,
      target,
      confirmedStopped,
      acceptWanTwoStep,
      now: deps.now(),
    });
    const reason = text(form, FIELDS.reason);

    if (check.cooldownOnly && check.earliestAllowedAt) {
      // Only the 24-hour rule stands in the way: offer to run it then, in a view pushed over the form.
      const runAt = scheduledRunAt(check.earliestAllowedAt);
      const scheduled = {
        projectName: project.name,
        vmid,
        target,
        confirmedStopped,
        acceptWanTwoStep,
        reason,
        runAt: runAt.toISOString(),
      };
      try {
        await withDeadline(deps.drafts.save({ ...draft, scheduled }));
      } catch {
        return void (await ack({ response_action: 'errors', errors: { [FIELDS.project]: TRY_AGAIN } }));
      }
      return void (await ack({
        response_action: 'push',
        view: scheduleModal(
          draft.id,
          check.violations.map((v) => v.message),
          runAt,
        ),
      }));
    }
    if (check.violations.length > 0) {
      return void (await ack({
        response_action: 'errors',
        errors: fieldErrors(check.violations, blocks, FIELDS.cores),
      }));
    }

    // Taking the draft makes a double submit or a replayed payload a no-op.
    const taken = await withDeadline(deps.drafts.take(draft.id)).catch(() => false);
    if (!taken)
      return void (await ack({ response_action: 'errors', errors: { [FIELDS.project]: STALE_FORM } }));
    await ack({ response_action: 'clear' });
    const origin = { user: body.user.id, teamId: draft.teamId, channel: draft.channel };
    try {
      await deps.requests.createResize(origin, { project, vm, target, check, confirmedStopped, reason });
    } catch (error) {
      deps.logger.error({ err: error }, 'resize request could not be stored');
      await deps.slack.chat
        .postEphemeral({ channel: draft.channel, user: body.user.id, text: TRY_AGAIN })
        .catch(() => undefined);
    }
  });
}
