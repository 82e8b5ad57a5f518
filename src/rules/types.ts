/**
 * The vocabulary of the rules: what is known of a VM, what a resize asks for, and why it may be refused.
 * Plain data; the rules import nothing else of ours.
 */

export type WanMode = 'off' | 'ipv4' | 'ipv6' | 'dual';
export type CpuClass = 'regular' | 'light';
export type OnOff = 'off' | 'on';

/** What the bot knows of a VM: the policy's facts, overlaid with what the bot itself applied. */
export interface VmKnown {
  vmid: number;
  name?: string;
  ha: boolean;
  cores?: number;
  ramGb?: number;
  osDiskGb?: number;
  cpuClass?: CpuClass;
  wanMode?: WanMode;
  privateNetwork?: OnOff;
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
  field: ResizeField | 'vmid' | 'typedVmid' | 'backupSlug' | 'autostart' | 'confirmStopped' | 'project';
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
    | 'bad_vmid';
  /** One sentence for the requester: why, and what would be allowed. */
  message: string;
  allowedAt?: Date;
}

/** The direction of a change to one field, where it can be compared. */
export type Direction = 'up' | 'down' | 'same' | 'unknown';
