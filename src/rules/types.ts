/**
 * The vocabulary of the rules: what is known of a VM, what a resize asks for, and why it may be refused.
 * Plain data; the rules import nothing else of ours.
 */

/** The values each choice takes, in the order the policy's `resize_fields` map them; listed nowhere else. */
export const WAN_MODES = ['off', 'ipv4', 'ipv6', 'dual'] as const;
export const CPU_CLASSES = ['regular', 'light'] as const;
export const ON_OFF = ['off', 'on'] as const;

export type WanMode = (typeof WAN_MODES)[number];
export type CpuClass = (typeof CPU_CLASSES)[number];
export type OnOff = (typeof ON_OFF)[number];

/** What the bot knows of a VM: the policy's facts, overlaid with what the bot itself applied. */
export interface VmKnown extends ResizeTarget {
  vmid: number;
  name?: string;
  ha: boolean;
  /** Creation time, when the policy says it. */
  createdAt?: Date;
  /** The last time the bot increased cores, RAM or CPU class. */
  lastIncreaseAt?: Date;
}

/** What a resize asks for; an absent field is left as it is and not sent. */
export interface ResizeTarget {
  cores?: number;
  ramGb?: number;
  osDiskGb?: number;
  cpuClass?: CpuClass;
  wanMode?: WanMode;
  privateNetwork?: OnOff;
}

export type ResizeField = keyof ResizeTarget;

/** Upper bounds for typed numbers (the API documents none). */
export interface SizeLimits {
  cores: number;
  ramGb: number;
  osDiskGb: number;
}

/** Why a field was refused. `allowedAt` is set for the 24-hour rule; `allowed` says what would pass. */
export interface Violation {
  field:
    | ResizeField
    | 'vmid'
    | 'typedVmid'
    | 'backupSlug'
    | 'autostart'
    | 'confirmStopped'
    | 'project'
    /** The "return to the current size after" of a temporary change. */
    | 'lease';
  code:
    | 'cooldown'
    | 'needs_stopped'
    | 'disk_shrink'
    | 'wan_direct'
    | 'bounds'
    | 'not_integer'
    | 'no_change'
    | 'not_configured'
    | 'typed_vmid_mismatch'
    | 'autostart_ha'
    | 'bad_slug'
    | 'bad_uuid'
    | 'bad_vmid'
    | 'bad_value';
  /** One sentence for the requester: why, and what would be allowed. */
  message: string;
  allowedAt?: Date;
}

/**
 * The direction of a change to one field: up/down for ordered fields (cores, RAM, disk, CPU class with
 * light < regular), `changed` for unordered ones (WAN mode, private network), `unknown` when the current value
 * is not known to the bot.
 */
export type Direction = 'up' | 'down' | 'same' | 'changed' | 'unknown';

/**
 * The hourly prices the cost rules read, as decimal strings. `PriceModel` of the cloud layer satisfies it
 * structurally, so the rules need not import the cloud layer.
 */
export interface PriceLike {
  vcoreRegular?: string;
  vcoreLight?: string;
  ram?: string;
  storageFast?: string;
  publicIp?: string;
  privateNetworkTag?: string;
}

/** The policy's reference VM (`reference_vm`), in the policy file's own spelling. */
export interface ReferenceVm {
  cores: number;
  ram_gb: number;
  os_disk_gb: number;
  cpu_class: CpuClass;
  public_ip: boolean;
}
