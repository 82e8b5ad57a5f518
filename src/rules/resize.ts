import { checkBounds } from './inputs.ts';
import {
  CPU_CLASSES,
  type CpuClass,
  type Direction,
  ON_OFF,
  type ResizeField,
  type ResizeTarget,
  type SizeLimits,
  type Violation,
  type VmKnown,
  WAN_MODES,
  type WanMode,
} from './types.ts';

/** The API's wait before cores, RAM or CPU class may be lowered after creation or an increase. */
export const COOLDOWN_MS = 24 * 3_600_000;

/** Everything a resize is checked with; `now` is injected so the 24-hour rule is testable. */
export interface ResizeCheckInput {
  vm: VmKnown;
  target: ResizeTarget;
  limits: SizeLimits;
  /** Whether the policy names the API field for the CPU class / private network (`resize_fields`). */
  configured: { cpuClass: boolean; privateNetwork: boolean };
  /** The requester confirmed the VM is stopped. */
  confirmedStopped: boolean;
  /** The requester accepts a WAN switch in two steps through `off`. */
  acceptWanTwoStep: boolean;
  now: Date;
}

/** The verdict on a resize. Callers send `steps` only when `violations` is empty. */
export interface ResizeCheck {
  violations: Violation[];
  /** The direction of every field the target names. */
  directions: Partial<Record<ResizeField, Direction>>;
  /** Ordered fields lowered (cores, RAM, CPU class; a lowered disk is a violation). */
  decreases: ResizeField[];
  /** Ordered fields raised. */
  increases: ResizeField[];
  /** Fields whose current value the bot does not know; the API judges them. */
  unknown: ResizeField[];
  /** The rules that apply, one line each, for the request message. */
  notes: string[];
  /** The bodies to send in order: one, or two for a WAN switch through `off`. Unchanged fields are left out. */
  steps: ResizeTarget[];
  /** Cores or RAM are lowered (or their current value is unknown, so they may be), so the VM must be stopped. */
  needsStoppedConfirmation: boolean;
  /** True when the 24-hour rule is the only thing refusing it (the bot then offers to schedule it). */
  cooldownOnly: boolean;
  /** When the 24-hour rule stops refusing the lowering, if it refuses now. */
  earliestAllowedAt?: Date;
  /** The WAN mode goes through `off` in two steps. */
  wanTwoStep: boolean;
}

const LABEL: Record<ResizeField, string> = {
  cores: 'Cores',
  ramGb: 'RAM',
  osDiskGb: 'The OS disk',
  cpuClass: 'The CPU class',
  wanMode: 'The WAN mode',
  privateNetwork: 'The private network',
};

/** Each field as a sentence names it: "cores", "the OS disk". */
export const NAME: Record<ResizeField, string> = {
  cores: 'cores',
  ramGb: 'RAM',
  osDiskGb: 'the OS disk',
  cpuClass: 'the CPU class',
  wanMode: 'the WAN mode',
  privateNetwork: 'the private network',
};

const FIELDS: readonly ResizeField[] = [
  'cores',
  'ramGb',
  'osDiskGb',
  'cpuClass',
  'wanMode',
  'privateNetwork',
];
const COOLDOWN_FIELDS: readonly ResizeField[] = ['cores', 'ramGb', 'cpuClass'];
const CPU_RANK: Record<CpuClass, number> = { light: 0, regular: 1 };
const ATTACHED: readonly WanMode[] = ['ipv4', 'ipv6', 'dual'];

/** "2025-03-02 10:00 UTC", rounded up to the minute so the time shown is never before the time allowed. */
export function formatUtc(date: Date): string {
  const ms = Math.ceil(date.getTime() / 60_000) * 60_000;
  return `${new Date(ms).toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

/** A value as people read it: "4 GB" for RAM and disk. */
function shown(field: ResizeField, value: unknown): string {
  return field === 'ramGb' || field === 'osDiskGb' ? `${value} GB` : String(value);
}

/** Up, down, same, changed or unknown for one field. */
export function directionOf<F extends ResizeField>(
  field: F,
  from: ResizeTarget[F],
  to: ResizeTarget[F],
): Direction {
  if (from === undefined) return 'unknown';
  if (from === to) return 'same';
  if (typeof from === 'number' && typeof to === 'number') return to > from ? 'up' : 'down';
  if (field === 'cpuClass') return CPU_RANK[to as CpuClass] > CPU_RANK[from as CpuClass] ? 'up' : 'down';
  return 'changed';
}

/** A value outside its field's vocabulary (only reachable from hand-built targets, not the modal). */
function badValue(target: ResizeTarget): Violation[] {
  const out: Violation[] = [];
  if (target.cpuClass !== undefined && !CPU_CLASSES.includes(target.cpuClass)) {
    out.push({
      field: 'cpuClass',
      code: 'bad_value',
      message: `The CPU class is ${CPU_CLASSES.join(' or ')}.`,
    });
  }
  if (target.wanMode !== undefined && !WAN_MODES.includes(target.wanMode)) {
    out.push({ field: 'wanMode', code: 'bad_value', message: `The WAN mode is ${WAN_MODES.join(', ')}.` });
  }
  if (target.privateNetwork !== undefined && !ON_OFF.includes(target.privateNetwork)) {
    out.push({ field: 'privateNetwork', code: 'bad_value', message: 'The private network is off or on.' });
  }
  return out;
}

/** What the 24-hour rule counts from: the later of creation and the last increase, where known. */
function cooldownStart(vm: VmKnown): { at: Date; what: string } | undefined {
  const { createdAt, lastIncreaseAt } = vm;
  if (lastIncreaseAt && (!createdAt || lastIncreaseAt >= createdAt)) {
    return { at: lastIncreaseAt, what: `was last increased at ${formatUtc(lastIncreaseAt)}` };
  }
  if (createdAt) return { at: createdAt, what: `was created at ${formatUtc(createdAt)}` };
  return undefined;
}

function keepLine(field: ResizeField, value: unknown): string {
  if (field === 'cpuClass') return `keep the CPU class ${value}`;
  if (field === 'cores') return `keep ${value} cores or more`;
  return `keep ${shown(field, value)} of RAM or more`;
}

/** Which asked fields go to the API and in which direction each moves; out-of-bounds or unconfigured ones do not. */
function fieldsToSend(
  input: ResizeCheckInput,
  violations: Violation[],
): { directions: Partial<Record<ResizeField, Direction>>; sent: ResizeTarget } {
  const { vm, target, limits, configured } = input;
  const directions: Partial<Record<ResizeField, Direction>> = {};
  const sent: ResizeTarget = {};
  const invalid = new Set(violations.map((v) => v.field));
  for (const field of FIELDS) {
    const to = target[field];
    if (to === undefined || invalid.has(field)) continue;
    if (field === 'cores' || field === 'ramGb' || field === 'osDiskGb') {
      const bounds = checkBounds(to as number, field, limits[field]);
      if (bounds) {
        violations.push(bounds);
        continue;
      }
    }
    const direction = directionOf(field, vm[field], to);
    directions[field] = direction;
    if (direction === 'same') continue;
    if (
      (field === 'cpuClass' && !configured.cpuClass) ||
      (field === 'privateNetwork' && !configured.privateNetwork)
    ) {
      const key = field === 'cpuClass' ? 'cpu_class' : 'private_network';
      violations.push({
        field,
        code: 'not_configured',
        message: `${LABEL[field]} cannot be changed: the policy file does not name the API's field for it (resize_fields.${key}). Leave it as it is.`,
      });
      continue;
    }
    Object.assign(sent, { [field]: to });
  }
  return { directions, sent };
}

/** Rule 3: the OS disk never shrinks. */
function checkDiskRule(
  input: ResizeCheckInput,
  direction: Direction | undefined,
  sent: ResizeTarget,
  violations: Violation[],
  notes: string[],
): void {
  const { vm, target } = input;
  if (direction === 'down' && vm.osDiskGb !== undefined) {
    violations.push({
      field: 'osDiskGb',
      code: 'disk_shrink',
      message: `The OS disk cannot shrink: the minimum allowed is ${vm.osDiskGb} GB, its current size (asked: ${target.osDiskGb} GB).`,
    });
    delete sent.osDiskGb;
  } else if (direction === 'up') {
    notes.push(`The OS disk grows to ${target.osDiskGb} GB and can never shrink back.`);
  }
}

/** Rule 1: lowering cores, RAM or CPU class waits 24 hours after creation or an increase; returns when it may. */
function checkCooldownRule(
  input: ResizeCheckInput,
  decreases: ResizeField[],
  increases: ResizeField[],
  violations: Violation[],
  notes: string[],
): Date | undefined {
  const { vm, now } = input;
  let earliestAllowedAt: Date | undefined;
  if (decreases.length > 0) {
    const start = cooldownStart(vm);
    if (!start) {
      notes.push(
        'The bot does not know when this VM was created or last increased: the API refuses lowering cores, RAM or CPU class within 24 hours of either.',
      );
    } else {
      const allowedAt = new Date(start.at.getTime() + COOLDOWN_MS);
      if (now < allowedAt) {
        earliestAllowedAt = allowedAt;
        for (const field of decreases) {
          violations.push({
            field,
            code: 'cooldown',
            allowedAt,
            message: `${LABEL[field]} can be lowered from ${formatUtc(allowedAt)}: the VM ${start.what}, and the API refuses lowering cores, RAM or CPU class within 24 hours of that. Until then, ${keepLine(field, vm[field])}.`,
          });
        }
      } else {
        notes.push(`Lowering is past the 24-hour wait: the VM ${start.what}.`);
      }
    }
  }
  if (increases.some((f) => f !== 'osDiskGb')) {
    notes.push(
      'Raising cores, RAM or CPU class starts a new 24-hour wait before any of them can be lowered.',
    );
  }
  return earliestAllowedAt;
}

/**
 * Rule 2: lowering cores or RAM needs the VM stopped; the bot cannot see power state, so the requester confirms.
 * A size the bot does not know may be lowered by any value asked: the same confirmation is asked.
 */
function checkStoppedRule(
  input: ResizeCheckInput,
  decreases: ResizeField[],
  unknown: ResizeField[],
  sent: ResizeTarget,
  violations: Violation[],
): { lowersCoresOrRam: boolean; unknownCoresOrRam: ('cores' | 'ramGb')[] } {
  const { vm } = input;
  const lowersCoresOrRam = decreases.includes('cores') || decreases.includes('ramGb');
  const unknownCoresOrRam = (['cores', 'ramGb'] as const).filter((f) => unknown.includes(f));
  if (lowersCoresOrRam && !input.confirmedStopped) {
    const keep = (['cores', 'ramGb'] as const)
      .filter((f) => decreases.includes(f))
      .map((f) => keepLine(f, vm[f]))
      .join(' and ');
    violations.push({
      field: 'confirmStopped',
      code: 'needs_stopped',
      message: `Lowering cores or RAM needs the VM stopped: stop the VM, then tick “The VM is stopped”. Otherwise ${keep}.`,
    });
  } else if (unknownCoresOrRam.length > 0 && !input.confirmedStopped) {
    violations.push({
      field: 'confirmStopped',
      code: 'needs_stopped',
      message: `The bot does not know this VM's current ${unknownCoresOrRam.map((f) => NAME[f]).join(' or ')}, so ${unknownCoresOrRam.map((f) => shown(f, sent[f])).join(' and ')} may lower ${unknownCoresOrRam.length === 1 ? 'it' : 'them'}, and lowering cores or RAM needs the VM stopped: stop the VM, then tick “The VM is stopped” (or add the VM's size to the policy file).`,
    });
  }
  return { lowersCoresOrRam, unknownCoresOrRam };
}

/** Rule 4: no direct switch between attached WAN modes; returns whether the switch goes through off in two steps. */
function checkWanRule(
  input: ResizeCheckInput,
  sent: ResizeTarget,
  violations: Violation[],
  notes: string[],
): boolean {
  const { vm } = input;
  let wanTwoStep = false;
  const wanTo = sent.wanMode;
  if (wanTo !== undefined) {
    const wanFrom = vm.wanMode;
    const direct = wanFrom !== undefined && ATTACHED.includes(wanFrom) && ATTACHED.includes(wanTo);
    if (direct && wanFrom !== undefined) {
      if (input.acceptWanTwoStep) wanTwoStep = true;
      else {
        violations.push({
          field: 'wanMode',
          code: 'wan_direct',
          message: `The WAN mode cannot switch directly from ${wanFrom} to ${wanTo}: tick “Switch WAN through Off” to run it in two steps (off, then ${wanTo}; no public network in between), or choose off or ${wanFrom}.`,
        });
      }
    } else if (wanFrom === undefined && ATTACHED.includes(wanTo)) {
      if (input.acceptWanTwoStep) {
        wanTwoStep = true;
        notes.push('The current WAN mode is not known to the bot: as accepted, it goes through off first.');
      } else {
        notes.push(
          `The current WAN mode is not known to the bot: if it is ipv4, ipv6 or dual and not ${wanTo}, the API refuses a direct switch.`,
        );
      }
    }
    if (wanTwoStep) {
      notes.push(
        `WAN switches in two steps: off first, then ${wanTo}. The VM has no public network between the two.`,
      );
    } else if (wanTo === 'off') {
      notes.push('WAN off: the VM loses its public network.');
    }
  }
  return wanTwoStep;
}

/** Checks a resize against the documented rules (docs/requests.md#the-rules) with what the bot knows of the VM. */
export function checkResize(input: ResizeCheckInput): ResizeCheck {
  const { target } = input;
  const violations: Violation[] = badValue(target);
  const notes: string[] = [];
  const { directions, sent } = fieldsToSend(input, violations);

  const fieldsWith = (d: Direction) => COOLDOWN_FIELDS.filter((f) => f in sent && directions[f] === d);
  const decreases = fieldsWith('down');
  const increases = [
    ...fieldsWith('up'),
    ...(directions.osDiskGb === 'up' && 'osDiskGb' in sent ? ['osDiskGb' as const] : []),
  ];
  const unknown = FIELDS.filter((f) => f in sent && directions[f] === 'unknown');

  checkDiskRule(input, directions.osDiskGb, sent, violations, notes);

  const earliestAllowedAt = checkCooldownRule(input, decreases, increases, violations, notes);

  const { lowersCoresOrRam, unknownCoresOrRam } = checkStoppedRule(
    input,
    decreases,
    unknown,
    sent,
    violations,
  );

  const wanTwoStep = checkWanRule(input, sent, violations, notes);

  for (const field of unknown) {
    if (field === 'wanMode') continue;
    notes.push(
      `${LABEL[field]} now is not known to the bot, so whether ${shown(field, sent[field])} is lower is not checked here: the API judges it.`,
    );
  }

  const asked = FIELDS.filter((f) => target[f] !== undefined);
  if (violations.length === 0 && Object.keys(sent).length === 0) {
    violations.push({
      field: asked[0] ?? 'cores',
      code: 'no_change',
      message:
        asked.length === 0
          ? 'Nothing to change: give at least one of cores, RAM, OS disk, CPU class, WAN mode or private network.'
          : `Nothing would change: ${asked.map((f) => `${NAME[f]} is already ${shown(f, target[f])}`).join(', ')}. Change at least one field.`,
    });
  }

  const steps = planSteps(sent, wanTwoStep);
  const cooldownOnly = violations.length > 0 && violations.every((v) => v.code === 'cooldown');
  return {
    violations,
    directions,
    decreases,
    increases,
    unknown,
    notes,
    steps,
    needsStoppedConfirmation: lowersCoresOrRam || unknownCoresOrRam.length > 0,
    cooldownOnly,
    earliestAllowedAt,
    wanTwoStep,
  };
}

/**
 * The bodies to send. For a WAN switch through `off`, every other change rides in the first step with
 * `wan_mode: off`, and the second step carries only the target WAN mode: if the API refuses the other changes
 * (power state, 24 hours), it refuses before the public network is touched, and the step that can strand the
 * VM at `off` is the one the API documents as always allowed (off → attached).
 */
function planSteps(sent: ResizeTarget, wanTwoStep: boolean): ResizeTarget[] {
  if (Object.keys(sent).length === 0) return [];
  if (!wanTwoStep || sent.wanMode === undefined) return [sent];
  const { wanMode, ...rest } = sent;
  return [{ ...rest, wanMode: 'off' }, { wanMode }];
}

/**
 * Whether applying `step` increases cores, RAM or CPU class (light → regular) over what was known; an unknown
 * previous value counts as an increase, so the 24-hour rule errs on the side the API enforces.
 */
export function isIncrease(
  step: ResizeTarget,
  before: Pick<VmKnown, 'cores' | 'ramGb' | 'cpuClass'>,
): boolean {
  if (step.cores !== undefined && (before.cores === undefined || step.cores > before.cores)) return true;
  if (step.ramGb !== undefined && (before.ramGb === undefined || step.ramGb > before.ramGb)) return true;
  if (step.cpuClass === 'regular' && before.cpuClass !== 'regular') return true;
  return false;
}
