import type { KnownBlock, ModalView, PlainTextOption } from '@slack/types';
import { INPUT_MAX_LENGTH, MAX_SLUG_LENGTH } from '../../rules/inputs.ts';
import { type LeaseReturn, type LeaseTerm, leaseTermText, sizeText } from '../../rules/lease.ts';
import type { VmKnown } from '../../rules/types.ts';
import { escapeMrkdwn, mrkdwn, plain, slackDate, truncate } from './text.ts';
import { TICKET_BLOCK, type TicketField, ticketInput } from './ticket.ts';

export type { TicketField } from './ticket.ts';

/** Callback ids of the bot's modals. */
export const VIEWS = {
  resize: 'resize',
  restore: 'restore',
  reject: 'reject',
  schedule: 'resize_schedule',
  breakGlass: 'break_glass',
} as const;

/** Block ids of modal inputs; named after the submission schema's keys so errors map back (STYLE lesson 8). */
export const FIELDS = {
  project: 'project',
  vmid: 'vmid',
  cores: 'cores',
  ramGb: 'ram_gb',
  osDiskGb: 'os_disk_gb',
  cpuClass: 'cpu_class',
  privateNetwork: 'private_network',
  wanMode: 'wan_mode',
  confirm: 'confirm',
  reason: 'reason',
  backupSlug: 'backup_slug',
  autostart: 'autostart',
  typedVmid: 'typed_vmid',
  rejectReason: 'reject_reason',
  breakGlassReason: 'break_glass_reason',
  leaseFor: 'lease_for',
  leaseUntil: 'lease_until',
  ticket: TICKET_BLOCK,
} as const;

/** The lease durations the resize modal offers (docs/policy.md#temporary-changes-leases: 1 d, 2 d, 7 d, or a date). */
export const LEASE_CHOICES = [24, 48, 168] as const;

/** An option value of the lease select: hours, e.g. "48h". */
export const leaseOptionValue = (hours: number) => `${hours}h`;

/** Checkbox values in the `confirm` block. */
export const CONFIRM = { stopped: 'stopped', wanTwoStep: 'wan_two_step' } as const;

const option = (value: string, label = value): PlainTextOption => ({ text: plain(label, 75), value });

function textInput(
  blockId: string,
  label: string,
  options: {
    initial?: string;
    placeholder?: string;
    optional?: boolean;
    hint?: string;
    multiline?: boolean;
    max?: number;
  } = {},
): KnownBlock {
  return {
    type: 'input',
    block_id: blockId,
    optional: options.optional ?? true,
    label: plain(label, 2000),
    ...(options.hint ? { hint: plain(options.hint, 2000) } : {}),
    element: {
      type: 'plain_text_input',
      action_id: blockId,
      ...(options.initial !== undefined ? { initial_value: options.initial } : {}),
      ...(options.placeholder ? { placeholder: plain(options.placeholder, 150) } : {}),
      ...(options.multiline ? { multiline: true } : {}),
      ...(options.max ? { max_length: options.max } : {}),
    },
  };
}

function select(
  blockId: string,
  label: string,
  choices: PlainTextOption[],
  options: { initial?: string; optional?: boolean; hint?: string } = {},
): KnownBlock {
  const initial = choices.find((c) => c.value === options.initial);
  return {
    type: 'input',
    block_id: blockId,
    optional: options.optional ?? true,
    label: plain(label, 2000),
    ...(options.hint ? { hint: plain(options.hint, 2000) } : {}),
    element: {
      type: 'static_select',
      action_id: blockId,
      placeholder: plain('Leave as it is', 150),
      options: choices,
      ...(initial ? { initial_option: initial } : {}),
    },
  };
}

/** What the resize modal knows when it opens. */
export interface ResizeModalInput {
  /** The form's draft, sealed (src/slack/drafts.ts): carried as its private_metadata. */
  sealedDraft: string;
  projects: { name: string; label: string }[];
  project?: string;
  vmid?: number;
  vm?: VmKnown;
  /** Typed on the command line; wins over what is known. */
  typed: {
    cores?: number;
    ramGb?: number;
    osDiskGb?: number;
    cpuClass?: string;
    wanMode?: string;
    privateNetwork?: string;
    /** `for=` on the command line. */
    lease?: LeaseTerm;
  };
  cpuClassConfigured: boolean;
  privateNetworkConfigured: boolean;
  /** Opened from a lease's "Return to the previous size": no lease fields, and a line on what it returns. */
  returning?: { requestId: string; to: LeaseReturn; changed?: LeaseReturn };
  ticket?: TicketField;
}

/** What a return form says above its fields. */
function returningLine(returning: NonNullable<ResizeModalInput['returning']>): string {
  const changed = returning.changed
    ? ` Another request resized the VM since (the bot now knows ${sizeText(returning.changed)}); this still proposes the lease's size.`
    : '';
  return `*Returns the temporary increase of request \`${returning.requestId}\`* to ${sizeText(returning.to)}.${changed} Checked like any resize and approved by the project's policy; lowering cores or RAM needs the VM stopped.`;
}

function knownLine(vm: VmKnown | undefined): string {
  if (!vm) return 'Pick the project and VM. What the bot knows of the VM is checked when you submit.';
  const parts = [
    vm.cores !== undefined ? `${vm.cores} cores` : undefined,
    vm.ramGb !== undefined ? `${vm.ramGb} GB RAM` : undefined,
    vm.osDiskGb !== undefined ? `${vm.osDiskGb} GB disk` : undefined,
    vm.cpuClass ? `${vm.cpuClass} CPU` : undefined,
    vm.wanMode ? `WAN ${vm.wanMode}` : undefined,
    vm.ha ? 'HA' : undefined,
  ].filter((p): p is string => p !== undefined);
  const known = parts.length > 0 ? parts.join(', ') : 'nothing yet about its size';
  const increase = vm.lastIncreaseAt ? ` Last increase ${slackDate(vm.lastIncreaseAt)}.` : '';
  return `*Known of VM ${vm.vmid}${vm.name ? ` (${escapeMrkdwn(vm.name)})` : ''}:* ${escapeMrkdwn(known)}.${increase}`;
}

/**
 * "Return to the current size after": 1 d, 2 d, 7 d (and a duration typed with `for=` that is none of these), or a
 * date. Both optional: without either the change is permanent.
 */
function leaseInputs(typed: LeaseTerm | undefined): KnownBlock[] {
  const choices = LEASE_CHOICES.map((hours) => option(leaseOptionValue(hours), leaseTermText({ hours })));
  const typedHours = typed && 'hours' in typed ? typed.hours : undefined;
  if (typedHours !== undefined && !LEASE_CHOICES.some((h) => h === typedHours)) {
    choices.push(option(leaseOptionValue(typedHours), `${leaseTermText({ hours: typedHours })} (as typed)`));
  }
  const select: KnownBlock = {
    type: 'input',
    block_id: FIELDS.leaseFor,
    optional: true,
    label: plain('Return to the current size after'),
    hint: plain(
      'Temporary increases of cores, RAM or CPU class only; counted from when the increase runs. The bot then offers the return (never before the 24-hour rule allows it) and reminds once a day.',
    ),
    element: {
      type: 'static_select',
      action_id: FIELDS.leaseFor,
      placeholder: plain('Keep the new size', 150),
      options: choices,
      ...(typedHours !== undefined
        ? { initial_option: choices.find((c) => c.value === leaseOptionValue(typedHours)) }
        : {}),
    },
  };
  const date: KnownBlock = {
    type: 'input',
    block_id: FIELDS.leaseUntil,
    optional: true,
    label: plain('…or return on this date'),
    hint: plain('At the start of that day, UTC.'),
    element: {
      type: 'datepicker',
      action_id: FIELDS.leaseUntil,
      ...(typed && 'until' in typed ? { initial_date: typed.until.slice(0, 10) } : {}),
    },
  };
  return [select, date];
}

/** The project and VM inputs both request modals open with. */
function projectAndVm(input: {
  projects: { name: string; label: string }[];
  project?: string;
  vmid?: number;
}): KnownBlock[] {
  return [
    select(
      FIELDS.project,
      'Project',
      input.projects.map((p) => option(p.name, truncate(p.label, 75))),
      { initial: input.project, optional: false },
    ),
    textInput(FIELDS.vmid, 'VM id', {
      initial: input.vmid !== undefined ? String(input.vmid) : undefined,
      placeholder: 'e.g. 101',
      optional: false,
      max: INPUT_MAX_LENGTH.vmid,
    }),
  ];
}

/** What the requester confirms of the VM: the bot cannot see its power state, nor choose the WAN steps for them. */
function confirmInput(): KnownBlock {
  return {
    type: 'input',
    block_id: FIELDS.confirm,
    optional: true,
    label: plain('Confirm'),
    hint: plain('Lowering cores or RAM needs the VM stopped; the bot cannot see its power state.'),
    element: {
      type: 'checkboxes',
      action_id: FIELDS.confirm,
      options: [
        option(CONFIRM.stopped, 'The VM is stopped'),
        option(CONFIRM.wanTwoStep, 'Switch WAN through Off if needed (two steps)'),
      ],
    },
  };
}

/** The resize modal (docs/slack.md#the-resize-modal): only the fields the policy configures, prefilled from the command and the VM. */
export function resizeModal(input: ResizeModalInput): ModalView {
  const vm = input.vm;
  const initialNumber = (typed: number | undefined, known: number | undefined) =>
    typed !== undefined ? String(typed) : known !== undefined ? String(known) : undefined;
  const blocks: KnownBlock[] = [
    ...(input.returning ? [{ type: 'section' as const, text: mrkdwn(returningLine(input.returning)) }] : []),
    { type: 'section', text: mrkdwn(knownLine(vm)) },
    ...projectAndVm(input),
    textInput(FIELDS.cores, 'Cores', {
      initial: initialNumber(input.typed.cores, vm?.cores),
      placeholder: 'unchanged',
      max: INPUT_MAX_LENGTH.cores,
    }),
    textInput(FIELDS.ramGb, 'RAM (GB)', {
      initial: initialNumber(input.typed.ramGb, vm?.ramGb),
      placeholder: 'unchanged',
      max: INPUT_MAX_LENGTH.ramGb,
    }),
    textInput(FIELDS.osDiskGb, 'OS disk (GB)', {
      initial: initialNumber(input.typed.osDiskGb, vm?.osDiskGb),
      placeholder: 'unchanged',
      hint: 'The OS disk can grow, never shrink.',
      max: INPUT_MAX_LENGTH.osDiskGb,
    }),
  ];
  if (input.cpuClassConfigured) {
    blocks.push(
      select(FIELDS.cpuClass, 'CPU class', [option('regular', 'Regular'), option('light', 'Light')], {
        initial: input.typed.cpuClass ?? vm?.cpuClass,
      }),
    );
  }
  blocks.push(
    select(
      FIELDS.wanMode,
      'WAN (public network)',
      [option('off', 'Off'), option('ipv4', 'IPv4'), option('ipv6', 'IPv6'), option('dual', 'Dual stack')],
      {
        initial: input.typed.wanMode ?? vm?.wanMode,
        hint: 'Switching between IPv4, IPv6 and dual goes through Off: the VM is without public network in between.',
      },
    ),
  );
  if (input.privateNetworkConfigured) {
    blocks.push(
      select(FIELDS.privateNetwork, 'Private network', [option('off', 'Off'), option('on', 'On')], {
        initial: input.typed.privateNetwork ?? vm?.privateNetwork,
      }),
    );
  }
  blocks.push(
    confirmInput(),
    ...(input.returning ? [] : leaseInputs(input.typed.lease)),
    ...ticketInput(input.ticket),
    textInput(FIELDS.reason, 'Reason', {
      multiline: true,
      placeholder: 'Why, for the approver and the audit log',
      max: 1000,
    }),
  );
  return {
    type: 'modal',
    callback_id: VIEWS.resize,
    private_metadata: input.sealedDraft,
    title: plain(input.returning ? 'Return to previous size' : 'Resize a VM', 24),
    submit: plain('Check and request', 24),
    close: plain('Cancel', 24),
    blocks,
  };
}

/** What the restore modal knows when it opens. */
export interface RestoreModalInput {
  /** The form's draft, sealed (src/slack/drafts.ts): carried as its private_metadata. */
  sealedDraft: string;
  projects: { name: string; label: string }[];
  project?: string;
  vmid?: number;
  backupSlug?: string;
  vm?: VmKnown;
  ticket?: TicketField;
}

/** The restore modal: a typed VM id and a stopped confirmation guard an overwrite of the disk. */
export function restoreModal(input: RestoreModalInput): ModalView {
  const blocks: KnownBlock[] = [
    {
      type: 'section',
      text: mrkdwn(
        ':warning: *A restore overwrites the VM’s disk with the backup.* Everything written since the backup is lost. The VM must be stopped.',
      ),
    },
    ...projectAndVm(input),
    textInput(FIELDS.backupSlug, 'Backup', {
      initial: input.backupSlug,
      placeholder: 'the backup slug from the portal’s backup list',
      optional: false,
      max: MAX_SLUG_LENGTH,
    }),
  ];
  // Autostart is refused for HA VMs, so it is not offered where the VM is known to be HA.
  if (!input.vm?.ha) {
    blocks.push({
      type: 'input',
      block_id: FIELDS.autostart,
      optional: true,
      label: plain('After the restore'),
      element: {
        type: 'checkboxes',
        action_id: FIELDS.autostart,
        options: [option('autostart', 'Start the VM (not allowed for HA VMs)')],
      },
    });
  }
  blocks.push(
    {
      type: 'input',
      block_id: FIELDS.confirm,
      optional: false,
      label: plain('Confirm'),
      element: {
        type: 'checkboxes',
        action_id: FIELDS.confirm,
        options: [option(CONFIRM.stopped, 'The VM is stopped')],
      },
    },
    textInput(FIELDS.typedVmid, 'Type the VM id again', {
      optional: false,
      placeholder: 'the same VM id, to confirm the overwrite',
      max: INPUT_MAX_LENGTH.vmid,
    }),
    ...ticketInput(input.ticket),
    textInput(FIELDS.reason, 'Reason', {
      multiline: true,
      placeholder: 'Why, for the approver and the audit log',
      max: 1000,
    }),
  );
  return {
    type: 'modal',
    callback_id: VIEWS.restore,
    private_metadata: input.sealedDraft,
    title: plain('Restore a VM', 24),
    submit: plain('Check and request', 24),
    close: plain('Cancel', 24),
    blocks,
  };
}

/** Asks an approver for an optional reason; carries only the request id. */
export function rejectModal(requestId: string, summary: string): ModalView {
  return {
    type: 'modal',
    callback_id: VIEWS.reject,
    private_metadata: requestId,
    title: plain('Reject request', 24),
    submit: plain('Reject', 24),
    close: plain('Back', 24),
    blocks: [
      { type: 'section', text: mrkdwn(`Reject *${escapeMrkdwn(summary)}* (request \`${requestId}\`)?`) },
      textInput(FIELDS.rejectReason, 'Reason (optional)', { multiline: true, max: 1000 }),
    ],
  };
}

/** Asks a break-glass user why frozen work cannot wait; carries only the request id. */
export function breakGlassModal(requestId: string, summary: string): ModalView {
  return {
    type: 'modal',
    callback_id: VIEWS.breakGlass,
    private_metadata: requestId,
    title: plain('Run during the freeze', 24),
    submit: plain('Run it now', 24),
    close: plain('Back', 24),
    blocks: [
      {
        type: 'section',
        text: mrkdwn(
          `Run *${escapeMrkdwn(summary)}* (request \`${requestId}\`) now, although a freeze holds it? Your name and reason go into the audit log and the thread.`,
        ),
      },
      textInput(FIELDS.breakGlassReason, 'Why it cannot wait', {
        multiline: true,
        max: 1000,
        optional: false,
      }),
    ],
  };
}

/** Offered when only the 24-hour rule stops a decrease: schedule it for the earliest allowed time. */
export function scheduleModal(sealedDraft: string, messages: string[], runAt: Date): ModalView {
  return {
    type: 'modal',
    callback_id: VIEWS.schedule,
    private_metadata: sealedDraft,
    title: plain('Not allowed yet', 24),
    submit: plain('Schedule it', 24),
    close: plain('Back', 24),
    blocks: [
      { type: 'section', text: mrkdwn(messages.map((m) => `• ${escapeMrkdwn(m)}`).join('\n')) },
      {
        type: 'section',
        text: mrkdwn(
          `Schedule this resize for ${slackDate(runAt)}, the earliest time it is allowed? It still needs its approval, and it can be cancelled until it runs.`,
        ),
      },
    ],
  };
}
