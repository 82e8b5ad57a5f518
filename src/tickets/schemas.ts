import { z } from 'zod';

// The answers cloudops reads, as the vendors' references document them; only the fields it uses are required.

/** Jira's Get issue with `fields=status` (v3 and v2 alike). */
export const jiraIssueSchema = z.object({
  id: z.string(),
  key: z.string(),
  fields: z.object({ status: z.object({ name: z.string().min(1) }) }),
});

/** Jira's Get current user: Cloud names an account id and email, Data Center a user name. */
export const jiraMyselfSchema = z.object({
  displayName: z.string().optional(),
  emailAddress: z.string().optional(),
  accountId: z.string().optional(),
  name: z.string().optional(),
});

/** Jira's error body: `{ errorMessages: [...], errors: {...} }`. */
export const jiraErrorSchema = z.object({ errorMessages: z.array(z.string()).optional() });

/** A field of a Table API record read with `sysparm_display_value=all`. */
const snField = z.object({ value: z.string(), display_value: z.string() });

/** `change_request` records as the Table API lists them (`sysparm_display_value=all`). */
export const snChangeListSchema = z.object({
  result: z.array(
    z.object({
      sys_id: snField,
      number: snField,
      state: snField,
      start_date: snField,
      end_date: snField,
    }),
  ),
});

/** The Table API's answer to a PATCH: the record. */
export const snRecordSchema = z.object({ result: z.record(z.string(), z.unknown()) });

/** Any Table API list: `{ result: [...] }`. */
export const snListSchema = z.object({ result: z.array(z.unknown()) });
