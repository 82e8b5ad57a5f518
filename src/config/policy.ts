import { readFile } from 'node:fs/promises';
import { isNode, LineCounter, parseDocument } from 'yaml';
import { z } from 'zod';
import { largestTypeable, type NumberField } from '../rules/inputs.ts';
import { CPU_CLASSES, ON_OFF, WAN_MODES } from '../rules/types.ts';

/** A size limit: a whole number above 0 that the modal's input for it can hold. */
const limit = (field: NumberField) =>
  z
    .number()
    .int()
    .positive()
    .max(largestTypeable(field), {
      message: `expected at most ${largestTypeable(field)} (the most the modal's input takes)`,
    });

const slackUserId = z
  .string()
  .regex(/^[UW][A-Z0-9]+$/, { message: 'expected a Slack user id such as U0123ABC' });
const slackChannelId = z
  .string()
  .regex(/^[CGD][A-Z0-9]+$/, { message: 'expected a Slack channel id such as C0123ABC' });
const uuid = z
  .string()
  .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, { message: 'expected a UUID' });
const wanMode = z.enum(WAN_MODES);
const approvalMode = z.enum(['required', 'none']);

/** Facts about a VM that the API cannot be asked for (PRODUCT.md §2). */
const vmFactsSchema = z
  .object({
    vmid: z.number().int().positive(),
    name: z.string().optional(),
    ha: z.boolean().default(false),
    cores: z.number().int().positive().optional(),
    ram_gb: z.number().int().positive().optional(),
    os_disk_gb: z.number().int().positive().optional(),
    wan_mode: wanMode.optional(),
    cpu_class: z.enum(CPU_CLASSES).optional(),
    private_network: z.enum(ON_OFF).optional(),
    /** When the VM was created (ISO 8601); the 24-hour rule counts from it. */
    created_at: z.iso.datetime({ offset: true }).optional(),
  })
  .strict();

const projectSchema = z
  .object({
    name: z.string().regex(/^[a-z0-9][a-z0-9._-]{0,62}$/i, {
      message: 'expected a short name of letters, digits, ".", "_" or "-"',
    }),
    uuid,
    cluster: z.string().min(1).optional(),
    channels: z.array(slackChannelId).min(1, { message: 'expected at least one channel' }),
    approvers: z.array(slackUserId).optional(),
    approval: z
      .object({
        resize_up: approvalMode.default('required'),
        resize_down: approvalMode.default('required'),
        restore: approvalMode.default('required'),
      })
      .strict()
      .default({ resize_up: 'required', resize_down: 'required', restore: 'required' }),
    vms: z.array(vmFactsSchema).default([]),
  })
  .strict();

/** A field the API does not name: the bot sends `field` with one of `values` (PRODUCT.md §2). */
const apiField = <T extends readonly [string, ...string[]]>(classes: T) =>
  z
    .object({
      field: z.string().regex(/^[a-z_][a-z0-9_]*$/i, { message: 'expected a JSON field name' }),
      /** The API's value for each of the bot's choices, in the order of `classes`. */
      values: z.array(z.string().min(1)).length(classes.length, {
        message: `expected ${classes.length} values, for ${classes.join(' and ')} in that order`,
      }),
    })
    .strict();

const policySchema = z
  .object({
    workspace: z
      .string()
      .regex(/^T[A-Z0-9]+$/, { message: 'expected a Slack team id such as T0123ABC' })
      .optional(),
    currency: z.string().min(1).max(8).default('EUR'),
    approvers: z.array(slackUserId).default([]),
    approval_ttl_hours: z
      .number()
      .positive()
      .max(24 * 30)
      .default(24),
    /** Days an ended request and its audit entries are kept before removal (never while a lease is open). */
    retention_days: z
      .number({ message: 'expected a number of days from 1 to 3650' })
      .int({ message: 'expected a whole number of days' })
      .min(1, { message: 'expected a number of days from 1 to 3650' })
      .max(3650, { message: 'expected a number of days from 1 to 3650' })
      .default(90),
    /** Upper bounds for what a requester may type; the API documents none. */
    limits: z
      .object({
        cores: limit('cores').default(64),
        ram_gb: limit('ramGb').default(512),
        os_disk_gb: limit('osDiskGb').default(4096),
      })
      .strict()
      .default({ cores: 64, ram_gb: 512, os_disk_gb: 4096 }),
    resize_fields: z
      .object({
        cpu_class: apiField(CPU_CLASSES).optional(),
        private_network: apiField(ON_OFF).optional(),
      })
      .strict()
      .default({}),
    /** The VM whose cost the digest and `/cloud clusters` show per cluster. */
    reference_vm: z
      .object({
        cores: z.number().int().positive().default(2),
        ram_gb: z.number().int().positive().default(4),
        os_disk_gb: z.number().int().positive().default(50),
        cpu_class: z.enum(CPU_CLASSES).default('regular'),
        public_ip: z.boolean().default(true),
      })
      .strict()
      .default({ cores: 2, ram_gb: 4, os_disk_gb: 50, cpu_class: 'regular', public_ip: true }),
    projects: z.array(projectSchema).default([]),
  })
  .strict()
  .superRefine((policy, ctx) => {
    const seen = new Map<string, number>();
    policy.projects.forEach((project, index) => {
      for (const key of [project.name.toLowerCase(), project.uuid.toLowerCase()]) {
        if (seen.has(key)) {
          ctx.addIssue({
            code: 'custom',
            path: ['projects', index, 'name'],
            message: `duplicate project ${key}`,
          });
        }
        seen.set(key, index);
      }
      const vmids = new Set<number>();
      project.vms.forEach((vm, vmIndex) => {
        if (vmids.has(vm.vmid)) {
          ctx.addIssue({
            code: 'custom',
            path: ['projects', index, 'vms', vmIndex, 'vmid'],
            message: `duplicate vmid ${vm.vmid}`,
          });
        }
        vmids.add(vm.vmid);
      });
      if (
        (project.approvers ?? policy.approvers).length === 0 &&
        Object.values(project.approval).includes('required')
      ) {
        ctx.addIssue({
          code: 'custom',
          path: ['projects', index, 'approvers'],
          message: 'approval is required but neither the project nor the policy names approvers',
        });
      }
    });
  });

export type Policy = z.infer<typeof policySchema>;
export type ProjectPolicy = Policy['projects'][number];
export type VmPolicyFacts = ProjectPolicy['vms'][number];
export type ApprovalMode = z.infer<typeof approvalMode>;

/** A policy file problem: one line with the file, the line and the field. */
export class PolicyError extends Error {
  override readonly name = 'PolicyError';
}

/** Parses policy YAML text. `source` names the file in error messages. */
export function parsePolicy(text: string, source = 'policy'): Policy {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false });
  const error = doc.errors[0];
  if (error) {
    const line = lineCounter.linePos(error.pos[0]).line;
    throw new PolicyError(`${source}:${line}: not valid YAML: ${error.message.split('\n')[0]}`);
  }
  const parsed = policySchema.safeParse(doc.toJS() ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  if (!issue) throw new PolicyError(`${source}:1: not a valid policy`);
  const path = issue.path.filter((part): part is string | number => typeof part !== 'symbol');
  // An unknown key is reported by zod at its parent: name the key itself, on its own line.
  if (issue.code === 'unrecognized_keys' && issue.keys[0] !== undefined) path.push(issue.keys[0]);
  // Point at the deepest node that exists: a missing key is reported at its parent's line.
  let line = 1;
  for (let depth = path.length; depth >= 0; depth--) {
    const node = doc.getIn(path.slice(0, depth), true);
    if (isNode(node) && node.range) {
      line = lineCounter.linePos(node.range[0]).line;
      break;
    }
  }
  const field =
    path.length > 0 ? path.map((p) => (typeof p === 'number' ? `[${p}]` : p)).join('.') : '(top level)';
  return failPolicy(`${source}:${line}: ${field.replace(/\.\[/g, '[')}: ${issue.message}`);
}

function failPolicy(message: string): never {
  throw new PolicyError(message);
}

/** Reads and parses the policy file at `path`. */
export async function loadPolicy(path: string): Promise<Policy> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new PolicyError(`${path}: cannot read the policy file (${code ?? 'unknown error'})`);
  }
  return parsePolicy(text, path);
}

/** Finds a project by name or UUID (both case-insensitive). */
export function findProject(policy: Policy, nameOrUuid: string): ProjectPolicy | undefined {
  const key = nameOrUuid.toLowerCase();
  return policy.projects.find((p) => p.name.toLowerCase() === key || p.uuid.toLowerCase() === key);
}

/** The approvers of a project: its own list, else the policy's default. */
export function approversOf(policy: Policy, project: ProjectPolicy): string[] {
  return project.approvers ?? policy.approvers;
}
