import { findProject } from '../../config/policy.ts';
import type { CloudRequest } from '../../requests/model/types.ts';
import { checkResizeUnder } from '../../requests/resize-check.ts';
import { resizeKinds } from '../../requests/tickets.ts';
import { knownVm } from '../../requests/vm-facts.ts';
import { cleanReason, parseVmid, parseWholeNumber, reasonProblem } from '../../rules/inputs.ts';
import { checkLease, type LeaseCheck, type LeaseTerm, parseLeaseTerm } from '../../rules/lease.ts';
import type { CpuClass, OnOff, ResizeTarget, Violation, WanMode } from '../../rules/types.ts';
import { leaseClosedText } from '../blocks/lease.ts';
import { CONFIRM, FIELDS, scheduleModal, VIEWS } from '../blocks/modals.ts';
import { type SlackDeps, TRY_AGAIN } from '../deps.ts';
import type { SlackRouter, ViewArgs } from '../router.ts';
import {
  readSubmission,
  releaseClaim,
  type Submission,
  storeFromDraft,
  submissionErrors,
} from './draft-submission.ts';
import { fieldErrors, inputBlockIds, readForm, text, ticked } from './form-values.ts';
import { formTicket } from './ticket-field.ts';

/**
 * A scheduled downsize runs this long after the exact end of the 24-hour wait, on a whole minute: the API's clock
 * may be a little behind ours, and the time shown then matches the rule's "from HH:MM" (rounded up).
 */
export const SCHEDULE_MARGIN_MS = 60_000;

/** The time a downsize allowed from `earliest` is scheduled for. */
export function scheduledRunAt(earliest: Date): Date {
  return new Date(Math.ceil(earliest.getTime() / 60_000) * 60_000 + SCHEDULE_MARGIN_MS);
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

/**
 * The lease the form asks for: a duration from the select or a date from the picker (not both), undefined for a
 * permanent change, or the field errors to show.
 */
function leaseOf(
  form: ReturnType<typeof readForm>,
): { term?: LeaseTerm } | { errors: Record<string, string> } {
  const duration = text(form, FIELDS.leaseFor);
  const date = text(form, FIELDS.leaseUntil);
  if (duration && date)
    return { errors: { [FIELDS.leaseUntil]: 'Choose a duration or a date for the return, not both.' } };
  const raw = duration ?? date;
  if (raw === undefined) return {};
  const term = parseLeaseTerm(raw);
  if ('error' in term) {
    const message = `${term.error.charAt(0).toUpperCase()}${term.error.slice(1)}.`;
    return { errors: { [duration ? FIELDS.leaseFor : FIELDS.leaseUntil]: message } };
  }
  return { term };
}

/** The lease check's refusals on the input the requester used (the select or the date). */
function leaseErrors(lease: LeaseCheck, term: LeaseTerm): Record<string, string> {
  const block = 'until' in term ? FIELDS.leaseUntil : FIELDS.leaseFor;
  return { [block]: lease.violations.map((v) => v.message).join(' ') };
}

/**
 * Why a return form (opened from a lease's offer) cannot be submitted: the lease ended meanwhile, or the form was
 * changed to another VM. Undefined when it can go on.
 */
async function returnRefused(
  deps: SlackDeps,
  submission: Submission,
  leaseRequestId: string,
  projectUuid: string,
  vmid: number,
): Promise<Record<string, string> | undefined> {
  let leased: CloudRequest | undefined;
  try {
    leased = await submission.within(deps.store.get(leaseRequestId));
  } catch {
    return { [FIELDS.project]: TRY_AGAIN };
  }
  if (!leased?.leaseOpen)
    return { [FIELDS.project]: leased ? leaseClosedText(leased) : 'This lease is gone.' };
  if (leased.projectUuid !== projectUuid || leased.vmid !== vmid)
    return {
      [FIELDS.vmid]: `This form returns VM ${leased.vmid} of ${leased.projectName}; to change another VM, use /cloud resize.`,
    };
  return undefined;
}

/** The sizes and modes the form asks for; a number out of its limit is a violation, a field left empty is absent. */
function readTarget(
  form: ReturnType<typeof readForm>,
  limits: SlackDeps['policy']['limits'],
  violations: Violation[],
): ResizeTarget {
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
  return target;
}

/** The VM as the bot knows it, what the form confirms of it, and the rules' verdict on the resize. */
function checkForm(
  deps: SlackDeps,
  form: ReturnType<typeof readForm>,
  {
    project,
    vmid,
    recorded,
    target,
  }: {
    project: NonNullable<ReturnType<typeof findProject>>;
    vmid: number;
    recorded: Submission['recorded'];
    target: ResizeTarget;
  },
) {
  const vm = knownVm(
    project.vms.find((v) => v.vmid === vmid),
    recorded,
    vmid,
  );
  const confirmedStopped = ticked(form, FIELDS.confirm, CONFIRM.stopped);
  const acceptWanTwoStep = ticked(form, FIELDS.confirm, CONFIRM.wanTwoStep);
  const check = checkResizeUnder(deps.policy, {
    vm,
    target,
    confirmedStopped,
    acceptWanTwoStep,
    now: deps.now(),
  });
  return { vm, confirmedStopped, acceptWanTwoStep, check };
}

/** A lease the rules refuse: its errors, with the rules' own (but the 24-hour wait, which a lease never needs). */
function leaseRefusal(
  check: { violations: Violation[] },
  lease: LeaseCheck,
  term: LeaseTerm,
  blocks: ReturnType<typeof inputBlockIds>,
): Record<string, string> | undefined {
  if (lease.violations.length === 0) return undefined;
  const others = check.violations.filter((v) => v.code !== 'cooldown');
  return { ...fieldErrors(others, blocks, FIELDS.cores), ...leaseErrors(lease, term) };
}

/**
 * Only the 24-hour rule stands in the way: the draft keeps what to run then, and the answer pushes the offer to
 * run it at `runAt` over the form (or, when the draft cannot be saved, asks to try again).
 */
async function offerSchedule(
  ack: ViewArgs['ack'],
  deps: SlackDeps,
  submission: Submission,
  draft: Parameters<SlackDeps['drafts']['save']>[0],
  view: ViewArgs['view'],
  check: { violations: Violation[] },
  runAt: Date,
): Promise<void> {
  try {
    await submission.within(deps.drafts.save(draft));
  } catch {
    return ack({ response_action: 'errors', errors: { [FIELDS.project]: TRY_AGAIN } });
  }
  await ack({
    response_action: 'push',
    view: scheduleModal(
      view.private_metadata,
      check.violations.map((v) => v.message),
      runAt,
    ),
  });
}

/** Handles the resize modal: rules as field errors, the 24-hour offer as a pushed view, else a request. */
export function register(app: SlackRouter, deps: SlackDeps): void {
  app.view(VIEWS.resize, async ({ ack, body, view }) => {
    // Every refusal answers with field errors: the form stays open, with what was typed, for the person to fix.
    const refuse = (errors: Record<string, string>) => ack({ response_action: 'errors', errors });
    const form = readForm(view);
    const blocks = inputBlockIds(view);
    const violations: Violation[] = [];
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
        return void (await refuse(refused ?? {}));
      const returning = draft.leaseReturn
        ? await returnRefused(deps, submission, draft.leaseReturn, project.uuid, vmid)
        : undefined;
      if (returning) return void (await refuse(returning));
      const target = readTarget(form, deps.policy.limits, violations);
      if (violations.length > 0) {
        return void (await refuse(fieldErrors(violations, blocks, FIELDS.cores)));
      }

      const { vm, confirmedStopped, acceptWanTwoStep, check } = checkForm(deps, form, {
        project,
        vmid,
        recorded,
        target,
      });
      const typedReason = text(form, FIELDS.reason);
      const reasonError = reasonProblem(typedReason);
      if (reasonError) return void (await refuse({ [FIELDS.reason]: reasonError }));
      const reason = typedReason === undefined ? undefined : cleanReason(typedReason);
      const asked = leaseOf(form);
      if ('errors' in asked) return void (await refuse(asked.errors));
      const { term } = asked;
      const lease = term ? checkLease({ vm, check, term, now: deps.now() }) : undefined;
      const leaseRefused = term && lease ? leaseRefusal(check, lease, term, blocks) : undefined;
      if (leaseRefused) return void (await refuse(leaseRefused));

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
          ticket: text(form, FIELDS.ticket),
        };
        return await offerSchedule(ack, deps, submission, { ...draft, scheduled }, view, check, runAt);
      }
      if (check.violations.length > 0) {
        return void (await refuse(fieldErrors(check.violations, blocks, FIELDS.cores)));
      }

      const ticketed = await formTicket(
        deps,
        project,
        resizeKinds(vm, target),
        text(form, FIELDS.ticket),
        blocks,
      );
      if ('errors' in ticketed) return void (await refuse(ticketed.errors));
      await ack({ response_action: 'clear' });
      storing = true;
      const origin = { user: body.user.id, teamId: draft.teamId, channel: draft.channel };
      await storeFromDraft(deps, { ...submission, draft }, body.user.id, 'resize request', () =>
        deps.requests.createResize(origin, {
          project,
          vm,
          target,
          check,
          confirmedStopped,
          reason,
          ...(term && lease ? { lease: { term, returnTo: lease.returnTo }, leaseNotes: lease.notes } : {}),
          ...(draft.leaseReturn ? { returnOf: draft.leaseReturn } : {}),
          ...ticketed,
        }),
      );
    } finally {
      // Anything but a stored request gives the claim back, so the same form can be submitted again.
      if (!storing) releaseClaim(deps, view, submission);
    }
  });
}
