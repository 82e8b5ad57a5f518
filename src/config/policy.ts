import { readFile } from 'node:fs/promises';
import { type Document, LineCounter, parseDocument, visit } from 'yaml';
import { z } from 'zod';
import { largestTypeable, type NumberField } from '../rules/inputs.ts';
import { CPU_CLASSES, ON_OFF, WAN_MODES } from '../rules/types.ts';
import { isTimeZone, parseClock, parseWallTime, zonedToUtc } from '../rules/zoned-time.ts';
import { agentsSchema, checkAgents } from './agents.ts';
import {
  issueWording,
  MAX_PROBLEMS,
  nouns,
  type PolicyProblem,
  problemLine,
  problemsOf,
} from './policy-problems.ts';
import { verifySchema } from './verify-policy.ts';

/** A size limit: a whole number above 0 that the modal's input for it can hold. */
const limit = (field: NumberField) =>
  z
    .number()
    .int()
    .positive()
    .max(largestTypeable(field), {
      message: `expected at most ${largestTypeable(field)} (the most the modal's input takes)`,
    });

/** Who may approve: a user (U…/W…) or a Slack user group (S…), resolved when someone clicks. */
const approverId = z
  .string()
  .regex(/^[UWS][A-Z0-9]+$/, {
    message: 'expected a Slack user id such as U0123ABC or a user group id such as S0123ABC',
  })
  .meta(nouns('a user or user group id', 'user or user group ids'));
const slackChannelId = z
  .string()
  .regex(/^[CGD][A-Z0-9]+$/, { message: 'expected a Slack channel id such as C0123ABC' })
  .meta(nouns('a channel id', 'channel ids'));
const uuid = z
  .string()
  .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, { message: 'expected a UUID' })
  .meta(nouns('a UUID', 'UUIDs'));
const wanMode = z.enum(WAN_MODES);
const approvalMode = z.enum(['required', 'none']);

/** `kind` and `change` of a rule's `when` take one value or a list. */
const oneOrMany = <T extends readonly [string, ...string[]]>(values: T, what: string) => {
  const one = z.enum(values, { message: `expected a ${what}: ${values.join(', ')}` });
  return z.union([one.transform((v) => [v]), z.array(one).min(1)], {
    message: `expected a ${what} or a list of them: ${values.join(', ')}`,
  });
};
export const APPROVAL_KINDS = ['resize_up', 'resize_down', 'restore'] as const;
export const CHANGE_NAMES = ['cores', 'ram', 'disk', 'cpu_class', 'wan', 'private_network'] as const;
const approvalCount = z
  .number({ message: 'expected a whole number of approvals, 0 or more' })
  .int({ message: 'expected a whole number of approvals, 0 or more' })
  .min(0, { message: 'expected a whole number of approvals, 0 or more' })
  .max(20, { message: 'expected at most 20 approvals' });
const MONEY_WORDS =
  'expected an amount per month such as 100 or -20.5, with at most 15 digits before the point and 6 after';
/**
 * A monthly amount the rules compare exactly: one that reads back as a plain decimal (never "1e-7" or "1e+21",
 * which the comparison could not read, so `policy check` and the running bot agree).
 */
const money = z
  .number({ message: MONEY_WORDS })
  .refine((amount) => /^\d{1,15}(\.\d{1,6})?$/.test(String(Math.abs(amount))), { message: MONEY_WORDS });

/** One approval rule: every key of `when` must match; the first rule that matches sets the count. */
const approvalRuleSchema = z
  .object({
    /** Shown on the request message; default: the `when` in words. */
    name: z.string().min(1).max(80).optional(),
    when: z
      .object({
        kind: oneOrMany(APPROVAL_KINDS, 'kind').optional(),
        change: oneOrMany(CHANGE_NAMES, 'change').optional(),
        monthly_delta_over: money.optional(),
        monthly_delta_under: money.optional(),
      })
      .strict(),
    count: approvalCount,
    /** Replaces the block's `verify` for the requests this rule matches. */
    verify: verifySchema.optional(),
  })
  .strict()
  .meta(nouns('a rule', 'rules'));

/** `approvals:` of a project or the default (docs/policy.md#approval-policies). */
const approvalsSchema = z
  .object({
    count: approvalCount.default(1),
    rules: z.array(approvalRuleSchema).default([]),
    remind_after_hours: z
      .number({ message: 'expected a number of hours above 0' })
      .positive({ message: 'expected a number of hours above 0' })
      .max(24 * 30)
      .optional(),
    escalate_to: z.array(approverId).default([]),
    /** Every approval of the requests this block covers is verified, unless the matching rule says otherwise. */
    verify: verifySchema.optional(),
  })
  .strict();

const timeZone = z
  .string()
  .refine(isTimeZone, { message: 'unknown time zone (expected e.g. Europe/Berlin)' });
const WEEKDAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'] as const;
const clock = z.string().refine((v) => parseClock(v) !== undefined, {
  message: 'expected a time of day such as "15:00" (00:00 to 24:00)',
});
const wallTime = z.string().refine((v) => parseWallTime(v) !== undefined, {
  message: 'expected a local date and time such as "2026-12-20T00:00"',
});

/**
 * A freeze: dates (`from`/`to` local to `tz`) or a weekly window (`weekly: { days, from, to }`, which may cross
 * midnight). Approved work waits until it ends.
 */
const freezeWindowSchema = z
  .object({
    from: wallTime.optional(),
    to: wallTime.optional(),
    weekly: z
      .object({
        days: z.array(z.enum(WEEKDAYS, { message: `expected a day: ${WEEKDAYS.join(', ')}` })).min(1),
        from: clock,
        to: clock,
      })
      .strict()
      .optional(),
    tz: timeZone.default('UTC'),
    reason: z.string().min(1).max(200).optional(),
  })
  .strict()
  .superRefine((window, ctx) => {
    if (window.weekly) {
      if (window.from !== undefined || window.to !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['weekly'],
          message: 'a window is either dates (from, to) or weekly',
        });
      else if (window.weekly.from === window.weekly.to)
        ctx.addIssue({ code: 'custom', path: ['weekly', 'to'], message: 'the window ends when it starts' });
      return;
    }
    if (window.from === undefined || window.to === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: [window.from === undefined ? 'from' : 'to'],
        message: 'a freeze needs from and to (local dates and times), or weekly',
      });
      return;
    }
    const from = parseWallTime(window.from);
    const to = parseWallTime(window.to);
    if (from && to && isTimeZone(window.tz) && zonedToUtc(to, window.tz) <= zonedToUtc(from, window.tz))
      ctx.addIssue({ code: 'custom', path: ['to'], message: 'the window must end after it starts' });
  })
  .meta(nouns('a freeze window', 'freeze windows'));

/** Facts about a VM that the API cannot be asked for (docs/policy.md#vm-facts). */
const vmFactsSchema = z
  .object({
    vmid: z.number().int().positive({ message: 'expected a VM id, a whole number above 0' }),
    name: z.string().optional(),
    ha: z.boolean().default(false),
    cores: z.number().int().positive().optional(),
    ram_gb: z.number().int().positive().optional(),
    os_disk_gb: z.number().int().positive().optional(),
    wan_mode: wanMode.optional(),
    cpu_class: z.enum(CPU_CLASSES).optional(),
    private_network: z.enum(ON_OFF).optional(),
    /** When the VM was created (ISO 8601); the 24-hour rule counts from it. */
    created_at: z.iso
      .datetime({ offset: true, message: 'expected a date and time such as "2025-03-01T10:00:00Z"' })
      .optional(),
  })
  .strict()
  .meta(nouns('a VM', 'VMs'));

const projectSchema = z
  .object({
    name: z
      .string()
      .regex(/^[a-z0-9][a-z0-9._-]{0,62}$/i, {
        message: 'expected a short name of letters, digits, ".", "_" or "-"',
      })
      .meta(nouns('a short name', 'short names')),
    uuid,
    cluster: z.string().min(1).optional(),
    channels: z.array(slackChannelId).min(1, { message: 'expected at least one channel' }),
    approvers: z.array(approverId).optional(),
    approval: z
      .object({
        resize_up: approvalMode.default('required'),
        resize_down: approvalMode.default('required'),
        restore: approvalMode.default('required'),
      })
      .strict()
      .default({ resize_up: 'required', resize_down: 'required', restore: 'required' }),
    vms: z.array(vmFactsSchema).default([]),
    approvals: approvalsSchema.optional(),
    freeze: z.array(freezeWindowSchema).optional(),
    break_glass: z.array(approverId).optional(),
  })
  .strict()
  .meta(nouns('a project', 'projects'));

/** A field the API does not name: the bot sends `field` with one of `values` (docs/policy.md#resize-fields). */
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
    approvers: z.array(approverId).default([]),
    approvals: approvalsSchema.optional(),
    freeze: z.array(freezeWindowSchema).optional(),
    break_glass: z.array(approverId).optional(),
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
    /** AI agents that may ask through MCP (docs/agents.md). */
    agents: agentsSchema,
  })
  .strict()
  // Run even when some values have the wrong type, so one `policy check` lists everything: the checks skip what is
  // malformed (already reported) instead of waiting for a clean file.
  .superRefine((policy, ctx) => crossCheck(policy, ctx), {
    when: (payload) => isRecord(payload.value),
  });

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `f()`, unless part of what it reads has the wrong type (reported by the schema already). */
function unlessMalformed(f: () => void): void {
  try {
    f();
  } catch (error) {
    if (!(error instanceof TypeError)) throw error;
  }
}

/** The checks across entries: duplicates, approvals nobody can give, agents' projects. */
function crossCheck(policy: Policy, ctx: z.RefinementCtx): void {
  const projects = (Array.isArray(policy.projects) ? policy.projects : []).filter(
    isRecord,
  ) as typeof policy.projects;
  if (Array.isArray(policy.agents))
    unlessMalformed(() => checkAgents({ agents: policy.agents.filter(isRecord), projects }, ctx));
  const seen = new Map<string, number>();
  projects.forEach((project, index) => {
    for (const field of ['name', 'uuid'] as const) {
      const value = project[field];
      if (typeof value !== 'string') continue;
      const key = value.toLowerCase();
      if (seen.has(key)) {
        ctx.addIssue({
          code: 'custom',
          path: ['projects', index, field],
          message: `duplicate project ${key}`,
        });
      }
      seen.set(key, index);
    }
    unlessMalformed(() => {
      const vmids = new Set<number>();
      project.vms.forEach((vm, vmIndex) => {
        if (!isRecord(vm) || typeof vm.vmid !== 'number') return;
        if (vmids.has(vm.vmid)) {
          ctx.addIssue({
            code: 'custom',
            path: ['projects', index, 'vms', vmIndex, 'vmid'],
            message: `duplicate vmid ${vm.vmid}`,
          });
        }
        vmids.add(vm.vmid);
      });
    });
    unlessMalformed(() => {
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
    unlessMalformed(() => unreachableCounts(policy, project, index, ctx));
  });
}

/**
 * Without a group to grow the list, a count above the listed users can never be reached (the requester never
 * counts, so the real need is one more): refused where the count stands.
 */
function unreachableCounts(
  policy: { approvers: string[]; approvals?: z.infer<typeof approvalsSchema> },
  project: { approvers?: string[]; approvals?: z.infer<typeof approvalsSchema> },
  index: number,
  ctx: z.RefinementCtx,
): void {
  const own = project.approvals !== undefined;
  const approvals = project.approvals ?? policy.approvals;
  if (!approvals) return;
  const listed = [...(project.approvers ?? policy.approvers), ...approvals.escalate_to];
  if (listed.some((id) => id.startsWith('S'))) return;
  const users = new Set(listed).size;
  const base: (string | number)[] = own ? ['projects', index, 'approvals'] : ['approvals'];
  const counts: { path: (string | number)[]; count: number }[] = [
    { path: [...base, 'count'], count: approvals.count },
    ...approvals.rules.map((rule, r) => ({ path: [...base, 'rules', r, 'count'], count: rule.count })),
  ];
  for (const { path, count } of counts) {
    // A count that is not a number is reported by the schema; comparing it would add a second, wrong line.
    if (typeof count === 'number' && count > users) {
      ctx.addIssue({
        code: 'custom',
        path,
        message: `${count} approvals can never be reached: only ${users} approver(s) are listed and no user group${own ? '' : ` (for project ${index})`}`,
      });
      return;
    }
  }
}

export type Policy = z.infer<typeof policySchema>;
export type ProjectPolicy = Policy['projects'][number];
export type VmPolicyFacts = ProjectPolicy['vms'][number];
export type ApprovalMode = z.infer<typeof approvalMode>;
export type ApprovalsPolicy = z.infer<typeof approvalsSchema>;
export type ApprovalRule = ApprovalsPolicy['rules'][number];
export type FreezeWindow = z.infer<typeof freezeWindowSchema>;
export type Weekday = (typeof WEEKDAYS)[number];
export type ApprovalKind = (typeof APPROVAL_KINDS)[number];
export type ChangeName = (typeof CHANGE_NAMES)[number];

/**
 * A policy file's problems, all found at once (up to {@link MAX_PROBLEMS}), each with the file, the line and
 * the field. One problem is one line; several are a count line, then one indented line each.
 */
export class PolicyError extends Error {
  override readonly name = 'PolicyError';
  constructor(
    /** The file as named in the messages. */
    readonly file: string,
    /** The problems listed, in file order. */
    readonly problems: PolicyProblem[],
    /** How many were found in all (more than listed when over {@link MAX_PROBLEMS}). */
    readonly total = problems.length,
  ) {
    const lines = problems.map((problem) => problemLine(file, problem));
    super(
      lines.length === 1 && total === 1
        ? (lines[0] as string)
        : [
            `${file}: ${total} problems${total > lines.length ? `, the first ${lines.length} listed` : ''}:`,
            ...lines.map((line) => `  ${line}`),
          ].join('\n'),
    );
  }

  /** One line for places that give each check a line (doctor): the count and the first problem. */
  get summary(): string {
    const first = this.problems[0];
    if (this.total === 1 || !first) return this.message.split('\n')[0] ?? this.file;
    return `${this.file}: ${this.total} problems, the first: ${problemLine(this.file, first)}`;
  }
}

/** Throws the problems found, the first {@link MAX_PROBLEMS} listed. */
function failPolicy(file: string, problems: PolicyProblem[]): never {
  throw new PolicyError(file, problems.slice(0, MAX_PROBLEMS), problems.length);
}

/** Parses policy YAML text. `source` names the file in error messages. */
export function parsePolicy(text: string, source = 'policy'): Policy {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false });
  if (doc.errors.length > 0) {
    failPolicy(
      source,
      doc.errors.map((error) => ({
        line: lineCounter.linePos(error.pos[0]).line,
        message: `not valid YAML: ${error.message.split('\n')[0]}`,
      })),
    );
  }
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: MAX_ALIASES });
  } catch (error) {
    // The yaml package refuses a document whose aliases expand past the limit (a "billion laughs" file).
    if (!(error instanceof ReferenceError)) throw error;
    failPolicy(source, [
      {
        line: firstAliasLine(doc, lineCounter),
        message: `not valid YAML: its aliases (*name) expand to more than ${MAX_ALIASES} copies; write the values out`,
      },
    ]);
  }
  const wording = issueWording();
  const parsed = policySchema.safeParse(data ?? {}, { error: wording.error });
  if (parsed.success) return parsed.data;
  const problems = problemsOf(parsed.error.issues, wording, doc, lineCounter);
  return failPolicy(source, problems.length > 0 ? problems : [{ line: 1, message: 'not a valid policy' }]);
}

/** More alias expansions than any policy needs: a file with more is refused as an expansion attack. */
const MAX_ALIASES = 100;

function firstAliasLine(doc: Document, lineCounter: LineCounter): number {
  let line = 1;
  visit(doc, {
    Alias(_, node) {
      if (node.range) line = lineCounter.linePos(node.range[0]).line;
      return visit.BREAK;
    },
  });
  return line;
}

/** Reads and parses the policy file at `path`. */
export async function loadPolicy(path: string): Promise<Policy> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // A first run has no policy yet: say how to make one.
    const hint =
      code === 'ENOENT'
        ? ': it does not exist; copy policy.example.yml to it and edit it (docs/policy.md), or set POLICY_FILE to where yours is'
        : '';
    throw new PolicyError(path, [
      { message: `cannot read the policy file (${code ?? 'unknown error'})${hint}` },
    ]);
  }
  return parsePolicy(text, path);
}

/** Finds a project by name or UUID (both case-insensitive). */
export function findProject(policy: Policy, nameOrUuid: string): ProjectPolicy | undefined {
  const key = nameOrUuid.toLowerCase();
  return policy.projects.find((p) => p.name.toLowerCase() === key || p.uuid.toLowerCase() === key);
}

/** The approvers of a project: its own list, else the policy's default (users and user groups). */
export function approversOf(policy: Policy, project: ProjectPolicy): string[] {
  return project.approvers ?? policy.approvers;
}

/** The approval policy of a project: its own `approvals`, else the top-level default, else one approval. */
export function approvalsOf(policy: Policy, project: ProjectPolicy): ApprovalsPolicy {
  return project.approvals ?? policy.approvals ?? { count: 1, rules: [], escalate_to: [] };
}

/** The freeze windows of a project: its own, else the top-level ones. */
export function freezeOf(policy: Policy, project: ProjectPolicy): FreezeWindow[] {
  return project.freeze ?? policy.freeze ?? [];
}

/** Who may run frozen work now: the project's own list, else the top-level one. */
export function breakGlassOf(policy: Policy, project: ProjectPolicy): string[] {
  return project.break_glass ?? policy.break_glass ?? [];
}

/** Every user group (S…) the policy names, for start-up and `cloudops policy check` to resolve. */
export function userGroupsOf(policy: Policy): string[] {
  const ids = [
    ...policy.approvers,
    ...(policy.approvals?.escalate_to ?? []),
    ...(policy.break_glass ?? []),
    ...policy.projects.flatMap((p) => [
      ...(p.approvers ?? []),
      ...(p.approvals?.escalate_to ?? []),
      ...(p.break_glass ?? []),
    ]),
  ];
  return [...new Set(ids.filter((id) => id.startsWith('S')))];
}
