import { z } from 'zod';
import { largestTypeable, type NumberField } from '../rules/inputs.ts';
import { CPU_CLASSES, ON_OFF, WAN_MODES } from '../rules/types.ts';
import { isTimeZone, parseClock, parseWallTime, zonedToUtc } from '../rules/zoned-time.ts';
import { nouns } from './policy-problems.ts';
import { verifySchema } from './verification-policy.ts';

// The policy file's sections, each a zod schema: limits, approvers, approval rules, freeze windows, VM facts,
// projects and the API's extra fields. policy.ts puts them together and checks across them.

/** A size limit: a whole number above 0 that the modal's input for it can hold. */
export const limit = (field: NumberField) =>
  z
    .number()
    .int()
    .positive()
    .max(largestTypeable(field), {
      message: `expected at most ${largestTypeable(field)} (the most the modal's input takes)`,
    });

/** Who may approve: a user (U…/W…) or a Slack user group (S…), resolved when someone clicks. */
export const approverId = z
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

/** `approval_valid_hours`: how long a decision stays good for its run (at most 30 days). */
export const approvalValidHours = z
  .number({ message: 'expected a number of hours from above 0 to 720' })
  .positive({ message: 'expected a number of hours from above 0 to 720' })
  .max(24 * 30, { message: 'expected a number of hours from above 0 to 720' });

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
export const approvalsSchema = z
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
export const freezeWindowSchema = z
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

/** Requests one person may make in an hour when the policy does not say. */
export const DEFAULT_PERSON_REQUESTS_PER_HOUR = 30;

const RATE = 'expected a whole number of requests per hour, from 1 to 10000';
/** A person's hourly request limit (`requests_per_hour`, top level or per project). */
export const personRate = z
  .number({ message: RATE })
  .int({ message: RATE })
  .min(1, { message: RATE })
  .max(10_000, { message: RATE });

/** The change-ticket systems the policy may name (docs/policy.md#change-tickets). */
export const TICKET_SYSTEM_NAMES = ['jira', 'servicenow'] as const;

/**
 * `change_ticket:` at the top (the default) or in a project: which system, whether a ticket is required, for which
 * kinds of change, and the states (display names) a ticket must be in. `projects` (Jira only) lists the Jira
 * project keys a ticket may belong to, so a ticket of an unrelated project cannot stand in for this one.
 */
export const changeTicketSchema = z
  .object({
    system: z.enum(TICKET_SYSTEM_NAMES, {
      message: `expected a ticket system: ${TICKET_SYSTEM_NAMES.join(', ')}`,
    }),
    required: z.boolean().default(true),
    for: z
      .array(z.enum(APPROVAL_KINDS, { message: `expected a kind: ${APPROVAL_KINDS.join(', ')}` }))
      .min(1, { message: 'expected at least one kind' })
      .default([...APPROVAL_KINDS]),
    states: z
      .array(z.string().trim().min(1).max(100).meta(nouns('a state name', 'state names')))
      .min(1, { message: 'expected at least one state name, e.g. [Approved] or [Scheduled, Implement]' }),
    projects: z
      .array(
        z
          .string()
          .regex(/^[A-Z][A-Z0-9_]{0,49}$/, { message: 'expected a Jira project key such as OPS' })
          .meta(nouns('a Jira project key', 'Jira project keys')),
      )
      .min(1)
      .optional(),
  })
  .strict()
  .superRefine((ticket, ctx) => {
    if (ticket.projects && ticket.system !== 'jira')
      ctx.addIssue({
        code: 'custom',
        path: ['projects'],
        message: 'projects names Jira project keys; it is for system: jira only',
      });
  });

export const projectSchema = z
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
    /** Replaces the top-level `approval_valid_hours` for this project's requests. */
    approval_valid_hours: approvalValidHours.optional(),
    /** Who may ask for changes here (users and user groups); unset: anyone in the project's channels. */
    requesters: z.array(approverId).optional(),
    change_ticket: changeTicketSchema.optional(),
  })
  .strict()
  .meta(nouns('a project', 'projects'));

/** A field the API does not name: the bot sends `field` with one of `values` (docs/policy.md#resize-fields). */
export const apiField = <T extends readonly [string, ...string[]]>(classes: T) =>
  z
    .object({
      field: z.string().regex(/^[a-z_][a-z0-9_]*$/i, { message: 'expected a JSON field name' }),
      /** The API's value for each of the bot's choices, in the order of `classes`. */
      values: z.array(z.string().min(1)).length(classes.length, {
        message: `expected ${classes.length} values, for ${classes.join(' and ')} in that order`,
      }),
    })
    .strict();

export type ChangeTicketPolicy = z.infer<typeof changeTicketSchema>;
export type TicketSystemId = (typeof TICKET_SYSTEM_NAMES)[number];

export type ApprovalMode = z.infer<typeof approvalMode>;
export type ApprovalsPolicy = z.infer<typeof approvalsSchema>;
export type ApprovalRule = ApprovalsPolicy['rules'][number];
export type FreezeWindow = z.infer<typeof freezeWindowSchema>;
export type Weekday = (typeof WEEKDAYS)[number];
export type ApprovalKind = (typeof APPROVAL_KINDS)[number];
export type ChangeName = (typeof CHANGE_NAMES)[number];
