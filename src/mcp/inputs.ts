import { z } from 'zod';
import { EMPTY_REASON, largestTypeable, MAX_SLUG_LENGTH, MAX_VMID, reasonProblem } from '../rules/inputs.ts';
import { MAX_LEASE_HOURS } from '../rules/lease.ts';
import { CPU_CLASSES, ON_OFF, WAN_MODES } from '../rules/types.ts';

/**
 * The tools' inputs, from the rules' own definitions (the values, bounds and patterns the slash command and the
 * modals accept); an MCP client sees them as JSON Schema. The policy's `limits` are checked by the rules afterwards,
 * with the sentence a person would read.
 */
const project = z
  .string()
  .min(1)
  .max(64)
  .describe('A project of the policy, by name (or UUID), among the projects this agent may ask in');
const vmId = z.number().int().positive().max(MAX_VMID).describe('The VM id (vmid)');
const whole = (field: 'cores' | 'ramGb' | 'osDiskGb', what: string) =>
  z.number().int().positive().max(largestTypeable(field)).optional().describe(what);
const reason = z
  .string()
  .min(1)
  .max(500)
  // Kept as typed (the request's message shows it cleaned and quoted); nothing readable in it is refused.
  .refine((typed) => reasonProblem(typed) === undefined, { message: EMPTY_REASON })
  .describe('Why: shown to the approvers in Slack and kept in the audit');
const requestId = z
  .string()
  .regex(/^[0-9A-Z]{8}$/, { message: 'expected a request id such as R7K2M9QX' })
  .describe('The request id a request tool answered with, e.g. R7K2M9QX');

const idempotencyKey = z
  .string()
  .regex(/^[A-Za-z0-9._:-]{1,64}$/, {
    message: 'expected up to 64 letters, digits, ".", "_", ":" and "-"',
  })
  .optional()
  .describe(
    'Any string of yours naming this ask: asked again with the same key (a retry), it answers with the request it made instead of making another (for a day)',
  );

const ticket = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, {
    message: 'expected a Jira key such as OPS-123 or a ServiceNow number such as CHG0030001',
  })
  .optional()
  .describe(
    'The change ticket (a Jira issue key or a ServiceNow change number) where the project’s policy asks for one: checked with the ticket system before anything is requested',
  );

/** What a resize asks for, as `/cloud resize` takes it. */
const resizeTarget = {
  project,
  vm_id: vmId,
  cores: whole('cores', 'Cores after the change'),
  ram_gb: whole('ramGb', 'RAM in GB after the change'),
  os_disk_gb: whole('osDiskGb', 'OS disk in GB after the change (a disk never shrinks)'),
  cpu_class: z.enum(CPU_CLASSES).optional().describe('CPU class after the change'),
  wan: z
    .enum(WAN_MODES)
    .optional()
    .describe('WAN mode after the change; a switch between attached modes goes through off, in two steps'),
  private_network: z.enum(ON_OFF).optional().describe('Private network after the change'),
  vm_stopped: z
    .boolean()
    .default(false)
    .describe('The VM is stopped (lowering cores or RAM needs it; nobody can check it for you)'),
  for_hours: z
    .number()
    .int()
    .positive()
    .max(MAX_LEASE_HOURS)
    .optional()
    .describe(
      'Make an increase temporary: the bot offers the return to the current size after this many hours',
    ),
};

export const INPUTS = {
  list_clusters: {},
  get_cluster: { name: z.string().min(1).max(100).describe('The cluster name, as list_clusters shows it') },
  list_vms: { project },
  plan_resize: resizeTarget,
  request_resize: { ...resizeTarget, reason, ticket, idempotency_key: idempotencyKey },
  request_restore: {
    project,
    vm_id: vmId,
    backup: z
      .string()
      .regex(new RegExp(`^[A-Za-z0-9._-]{1,${MAX_SLUG_LENGTH}}$`), {
        message: 'expected a backup slug: letters, digits, ".", "_" and "-"',
      })
      .describe('The backup slug, as the portal lists it'),
    autostart: z.boolean().default(false).describe('Start the VM after the restore (not for HA VMs)'),
    vm_stopped: z.boolean().describe('The VM is stopped: a restore overwrites its disk and needs it stopped'),
    reason,
    ticket,
    idempotency_key: idempotencyKey,
  },
  get_request: {
    request_id: requestId,
    wait_seconds: z
      .number()
      .min(0)
      .max(60)
      .optional()
      .describe('Wait up to this many seconds for the state to change before answering (at most 60)'),
  },
  cancel_request: { request_id: requestId },
} as const;

type Shape = (typeof INPUTS)[keyof typeof INPUTS];
/** The arguments a tool's handler receives, as its schema parses them. */
export type ToolArgs<K extends keyof typeof INPUTS> = z.output<z.ZodObject<(typeof INPUTS)[K]>>;
export type { Shape };
