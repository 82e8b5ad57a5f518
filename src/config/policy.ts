import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { type Document, LineCounter, parseDocument, visit } from 'yaml';
import { z } from 'zod';
import { CPU_CLASSES, ON_OFF } from '../rules/types.ts';
import { agentsSchema, checkAgents } from './agents.ts';
import {
  issueWording,
  MAX_PROBLEMS,
  type PolicyProblem,
  problemLine,
  problemsOf,
} from './policy-problems.ts';
import {
  type ApprovalsPolicy,
  apiField,
  approvalsSchema,
  approvalValidHours,
  approverId,
  type ChangeTicketPolicy,
  changeTicketSchema,
  DEFAULT_PERSON_REQUESTS_PER_HOUR,
  type FreezeWindow,
  freezeWindowSchema,
  limit,
  personRate,
  projectSchema,
  type TicketSystemId,
} from './policy-sections.ts';

export {
  APPROVAL_KINDS,
  type ApprovalKind,
  type ApprovalMode,
  type ApprovalRule,
  type ApprovalsPolicy,
  CHANGE_NAMES,
  type ChangeName,
  type ChangeTicketPolicy,
  type FreezeWindow,
  TICKET_SYSTEM_NAMES,
  type TicketSystemId,
  type Weekday,
} from './policy-sections.ts';

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
    /** How many requests one person may make in an hour, all projects together (agents have their own limit). */
    requests_per_hour: personRate.default(DEFAULT_PERSON_REQUESTS_PER_HOUR),
    approval_ttl_hours: z
      .number()
      .positive()
      .max(24 * 30)
      .default(24),
    /**
     * Hours an approval (or any decision that lets a request run) stays good for its run, from the later of the last
     * decision and the moment the work became due; the worker refuses it after (docs/policy.md#approval-validity).
     */
    approval_valid_hours: approvalValidHours.default(24),
    /** Days an ended request and its audit entries are kept before removal (never while a lease is open). */
    retention_days: z
      .number({ message: 'expected a number of days from 1 to 3650' })
      .int({ message: 'expected a whole number of days' })
      .min(1, { message: 'expected a number of days from 1 to 3650' })
      .max(3650, { message: 'expected a number of days from 1 to 3650' })
      .default(90),
    /**
     * Days an audit entry is kept, apart from the requests' retention: the oldest entries are trimmed past it and a
     * sealed anchor keeps what remains verifiable (docs/operations.md#audit-retention).
     */
    audit_retention_days: z
      .number({ message: 'expected a number of days from 1 to 3650' })
      .int({ message: 'expected a whole number of days' })
      .min(1, { message: 'expected a number of days from 1 to 3650' })
      .max(3650, { message: 'expected a number of days from 1 to 3650' })
      .default(400),
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
    /** The default change-ticket rule (docs/policy.md#change-tickets); a project's own replaces it. */
    change_ticket: changeTicketSchema.optional(),
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
  return (await loadPolicyFile(path)).policy;
}

/**
 * The policy's version: the SHA-256 of the file's bytes, shown (and recorded with every decision) as its first 12
 * hex digits.
 */
export function policyVersionOf(bytes: string | Buffer): string {
  return createHash('sha256').update(bytes).digest('hex').slice(0, 12);
}

/**
 * Reads the policy file at `path` once and parses it, with the version of the very bytes parsed: a file replaced
 * while it is read yields the version of what was read, never of a mix.
 */
export async function loadPolicyFile(path: string): Promise<{ policy: Policy; version: string }> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
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
  return { policy: parsePolicy(bytes.toString('utf8'), path), version: policyVersionOf(bytes) };
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

/** Hours a decision stays good for its run: the project's own `approval_valid_hours`, else the top-level one. */
export function approvalValidHoursOf(policy: Policy, project: ProjectPolicy): number {
  return project.approval_valid_hours ?? policy.approval_valid_hours;
}

/** Who may run frozen work now: the project's own list, else the top-level one. */
export function breakGlassOf(policy: Policy, project: ProjectPolicy): string[] {
  return project.break_glass ?? policy.break_glass ?? [];
}

/** Who may ask for changes in a project: its `requesters`; undefined when unset (anyone in its channels). */
export function requestersOf(project: ProjectPolicy): string[] | undefined {
  return project.requesters;
}

/** The change-ticket rule of a project: its own, else the top-level one; undefined: no ticket is asked for. */
export function changeTicketOf(policy: Policy, project: ProjectPolicy): ChangeTicketPolicy | undefined {
  return project.change_ticket ?? policy.change_ticket;
}

/** The ticket systems the policy names anywhere, for start-up and doctor to check they are configured. */
export function ticketSystemsOf(policy: Policy): TicketSystemId[] {
  const named = [policy.change_ticket, ...policy.projects.map((p) => p.change_ticket)].flatMap((t) =>
    t ? [t.system] : [],
  );
  return [...new Set(named)];
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
      ...(p.requesters ?? []),
    ]),
  ];
  return [...new Set(ids.filter((id) => id.startsWith('S')))];
}
