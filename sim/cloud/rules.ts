/**
 * The spec's rules as the simulator enforces them. Refusals come back in deliberately different body shapes
 * (`detail`, field lists, `non_field_errors`, `message`, `errors`), since the spec shows none and the client
 * must read them all.
 */
import type { SimVm, WanMode } from './state.ts';

/** Names and values of the two resize fields the spec leaves unnamed. Values run from highest to lowest. */
export interface SimFieldNames {
  cpuClass: { field: string; values: string[] };
  privateNetwork: { field: string; values: string[] };
}

/** Matches policy.example.yml. */
export const DEFAULT_FIELD_NAMES: SimFieldNames = {
  cpuClass: { field: 'cpu_type', values: ['regular', 'light'] },
  privateNetwork: { field: 'private_network', values: ['off', 'on'] },
};

export const DAY_MS = 24 * 3_600_000;

/** The answer of a refused call. */
export interface Refusal {
  ok: false;
  status: number;
  body: unknown;
}

export type ResizeCheck = { ok: true; changes: Partial<SimVm>; increased: boolean } | Refusal;
export type RestoreCheck = { ok: true; autostart: boolean } | Refusal;

/** Exact reasons the simulator gives; tests compare the client's sentences with these. */
export const SIM_REASONS = {
  lowerTooSoon: (at: Date) =>
    `CPU, RAM and CPU class can be lowered 24 hours after creation or the last increase, from ${at.toISOString()}.`,
  diskShrink: (current: number) => `The OS disk cannot shrink below its current ${current} GB.`,
  wanSwitch: (from: string, to: string) =>
    `WAN mode cannot switch from ${from} to ${to} directly: set wan_mode to off first.`,
  lowerRunning: 'Stop the VM before lowering CPU or RAM.',
  restoreRunning: 'The VM must be stopped to restore a backup.',
  autostartHa: 'Autostart is not allowed for high-availability VMs.',
  nothingToChange: 'No field to change.',
  unknownField: 'This field is not allowed.',
} as const;

const WAN_MODES: readonly WanMode[] = ['off', 'ipv4', 'ipv6', 'dual'];

function refuse(body: unknown, status = 400): Refusal {
  return { ok: false, status, body };
}

function wholeNumber(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isSafeInteger(value) && value > 0) return value;
  if (typeof value === 'string' && /^[1-9]\d{0,8}$/.test(value)) return Number(value);
  return undefined;
}

/** Decides a resize of `vm` with `body` at `now`; the caller applies `changes` on success. */
export function checkResize(vm: SimVm, body: unknown, now: Date, names: SimFieldNames): ResizeCheck {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return refuse({ non_field_errors: ['Invalid data. Expected a dictionary.'] });
  }
  const input = body as Record<string, unknown>;
  const known = new Set([
    'cores',
    'ram_gb',
    'os_disk_gb',
    'wan_mode',
    names.cpuClass.field,
    names.privateNetwork.field,
  ]);
  const fieldErrors: Record<string, string[]> = {};
  for (const key of Object.keys(input)) if (!known.has(key)) fieldErrors[key] = [SIM_REASONS.unknownField];

  const next: Partial<SimVm> = {};
  for (const [key, prop] of [
    ['cores', 'cores'],
    ['ram_gb', 'ramGb'],
    ['os_disk_gb', 'osDiskGb'],
  ] as const) {
    if (!(key in input)) continue;
    const value = wholeNumber(input[key]);
    if (value === undefined) fieldErrors[key] = ['A valid positive integer is required.'];
    else next[prop] = value;
  }
  if ('wan_mode' in input) {
    const mode = input.wan_mode;
    if (typeof mode === 'string' && (WAN_MODES as readonly string[]).includes(mode))
      next.wanMode = mode as WanMode;
    else fieldErrors.wan_mode = [`"${String(mode)}" is not a valid choice.`];
  }
  for (const [spec, prop] of [
    [names.cpuClass, 'cpuClass'],
    [names.privateNetwork, 'privateNetwork'],
  ] as const) {
    if (!(spec.field in input)) continue;
    const value = input[spec.field];
    if (typeof value === 'string' && spec.values.includes(value)) next[prop] = value;
    else fieldErrors[spec.field] = [`"${String(value)}" is not a valid choice.`];
  }
  if (Object.keys(fieldErrors).length > 0) return refuse(fieldErrors);
  if (Object.keys(next).length === 0) return refuse({ non_field_errors: [SIM_REASONS.nothingToChange] });

  // Rule 4: the OS disk never shrinks (a field-list body).
  if (next.osDiskGb !== undefined && next.osDiskGb < vm.osDiskGb) {
    return refuse({ os_disk_gb: [SIM_REASONS.diskShrink(vm.osDiskGb)] });
  }
  // Rule 5: no direct switch between attached WAN modes (a non_field_errors body).
  if (
    next.wanMode !== undefined &&
    next.wanMode !== vm.wanMode &&
    next.wanMode !== 'off' &&
    vm.wanMode !== 'off'
  ) {
    return refuse({ non_field_errors: [SIM_REASONS.wanSwitch(vm.wanMode, next.wanMode)] });
  }

  const rank = (value: string) => names.cpuClass.values.indexOf(value);
  const lowersCores = next.cores !== undefined && next.cores < vm.cores;
  const lowersRam = next.ramGb !== undefined && next.ramGb < vm.ramGb;
  const lowersClass = next.cpuClass !== undefined && rank(next.cpuClass) > rank(vm.cpuClass);
  // Rule 2: lowering within 24 h of creation or the last increase (a detail body).
  if (lowersCores || lowersRam || lowersClass) {
    const since = Math.max(vm.createdAt.getTime(), vm.lastIncreaseAt?.getTime() ?? 0);
    if (now.getTime() < since + DAY_MS)
      return refuse({ detail: SIM_REASONS.lowerTooSoon(new Date(since + DAY_MS)) });
  }
  // Rule 3: lowering CPU or RAM needs the VM stopped (a message body).
  if ((lowersCores || lowersRam) && vm.power !== 'stopped')
    return refuse({ message: SIM_REASONS.lowerRunning });

  const increased =
    (next.cores !== undefined && next.cores > vm.cores) ||
    (next.ramGb !== undefined && next.ramGb > vm.ramGb) ||
    (next.cpuClass !== undefined && rank(next.cpuClass) < rank(vm.cpuClass));
  return { ok: true, changes: next, increased };
}

/** Decides a restore of `vm` from `backup` with `body`. */
export function checkRestore(vm: SimVm, backup: string, body: unknown): RestoreCheck {
  if (!vm.backups.includes(backup)) return refuse({ detail: 'Backup not found.' }, 404);
  const input = body === undefined || body === null ? {} : body;
  if (typeof input !== 'object' || Array.isArray(input)) {
    return refuse({ non_field_errors: ['Invalid data. Expected a dictionary.'] });
  }
  const fields = input as Record<string, unknown>;
  const fieldErrors: Record<string, string[]> = {};
  for (const key of Object.keys(fields))
    if (key !== 'autostart') fieldErrors[key] = [SIM_REASONS.unknownField];
  if ('autostart' in fields && typeof fields.autostart !== 'boolean')
    fieldErrors.autostart = ['Must be a valid boolean.'];
  if (Object.keys(fieldErrors).length > 0) return refuse(fieldErrors);
  const autostart = fields.autostart === true;
  // Autostart on an HA VM: a field-list body; a running VM: 409 with an `errors` array.
  if (autostart && vm.ha) return refuse({ autostart: [SIM_REASONS.autostartHa] });
  if (vm.power !== 'stopped') {
    return refuse({ errors: [{ code: 'vm_not_stopped', detail: SIM_REASONS.restoreRunning }] }, 409);
  }
  return { ok: true, autostart };
}
