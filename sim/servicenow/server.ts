/**
 * A ServiceNow stand-in for tests, written from ServiceNow's published "Table API" reference (REST API reference,
 * `GET /api/now/table/{tableName}` with `sysparm_query`, `sysparm_display_value`, `sysparm_fields`, `sysparm_limit`;
 * `PATCH /api/now/table/{tableName}/{sys_id}`) on the `change_request` table, with Basic authentication. Answers are
 * `{"result": …}`; errors `{"error":{"message","detail"},"status":"failure"}`. A query that matches nothing is 200
 * with an empty `result`. Encoded queries are read as the reference describes them (`^` AND, `^OR` OR, `^NQ` a new
 * query) and, as an instance does by default, a condition it cannot read is ignored, so an injected `^OR…` in a
 * value really widens the query. `sysparm_display_value=all` gives each field as `{display_value, value}`; dates'
 * values are UTC (`yyyy-MM-dd HH:mm:ss`) and their display values are in the user's time zone.
 */
import type { IncomingMessage } from 'node:http';
import {
  type Answer,
  basicMatches,
  describeAuth,
  type Handled,
  type StandInBase,
  startTicketStandIn,
} from '../tickets/stand-in.ts';

export type { TicketCall, TicketFault } from '../tickets/stand-in.ts';

/** The `state` choices of `change_request` (value → display value). */
export const CHANGE_STATES: Record<string, string> = {
  '-5': 'New',
  '-4': 'Assess',
  '-3': 'Authorize',
  '-2': 'Scheduled',
  '-1': 'Implement',
  '0': 'Review',
  '3': 'Closed',
  '4': 'Canceled',
};

export interface ChangeRequest {
  sys_id: string;
  number: string;
  /** The display value, e.g. "Implement". */
  state: string;
  /** UTC, as the instance stores them; absent: empty. */
  start?: Date;
  end?: Date;
  workNotes: string[];
}

export interface ServiceNowStandInOptions {
  user?: string;
  password?: string;
  /** The API user's time zone, in which display values of dates are given (default Europe/Berlin). */
  userTimeZone?: string;
  port?: number;
}

export interface ServiceNowStandIn extends StandInBase {
  user: string;
  password: string;
  addChange(number: string, state: string, window?: { start?: Date; end?: Date }): ChangeRequest;
  setState(number: string, state: string): void;
  change(number: string): ChangeRequest | undefined;
}

const TABLE = '/api/now/table/change_request';

export async function startServiceNowStandIn(
  options: ServiceNowStandInOptions = {},
): Promise<ServiceNowStandIn> {
  const user = options.user ?? 'cloudops.integration';
  const password = options.password ?? 'servicenow-password-test';
  const timeZone = options.userTimeZone ?? 'Europe/Berlin';
  const changes = new Map<string, ChangeRequest>();
  let nextSysId = 0;

  const handle = (method: string, url: URL, headers: IncomingMessage['headers'], body: unknown): Handled => {
    const ok = basicMatches(headers.authorization, user, password);
    const call = { auth: describeAuth(headers.authorization), authorised: ok };
    if (!url.pathname.startsWith('/api/now/table/'))
      return { call, answer: snError(400, 'Requested URI does not represent any resource', null) };
    if (!ok)
      return { call, answer: snError(401, 'User Not Authenticated', 'Required to provide Auth information') };
    if (!url.pathname.startsWith(TABLE))
      return { call, answer: snError(403, 'User Not Authorized', 'Not sufficient permissions') };
    const display = url.searchParams.get('sysparm_display_value') ?? 'false';
    const fields = url.searchParams.get('sysparm_fields')?.split(',').filter(Boolean);
    if (method === 'GET' && url.pathname === TABLE) {
      const query = url.searchParams.get('sysparm_query') ?? '';
      const limit = Number(url.searchParams.get('sysparm_limit') ?? '10000');
      const found = [...changes.values()].filter((c) => matches(c, query)).slice(0, limit);
      return {
        call,
        answer: { status: 200, body: { result: found.map((c) => record(c, display, fields, timeZone)) } },
      };
    }
    const byId = /^\/api\/now\/table\/change_request\/([^/]+)$/.exec(url.pathname);
    const target = byId
      ? [...changes.values()].find((c) => c.sys_id === decodeURIComponent(byId[1] ?? ''))
      : undefined;
    if (!byId) return { call, answer: snError(400, 'Requested URI does not represent any resource', null) };
    if (!target)
      return {
        call,
        answer: snError(404, 'No Record found', "Record doesn't exist or ACL restricts the record retrieval"),
      };
    if (method === 'GET')
      return { call, answer: { status: 200, body: { result: record(target, display, fields, timeZone) } } };
    if (method === 'PATCH' || method === 'PUT') {
      const notes = (body as { work_notes?: unknown } | undefined)?.work_notes;
      if (typeof notes === 'string' && notes !== '') target.workNotes.push(notes);
      return { call, answer: { status: 200, body: { result: record(target, display, fields, timeZone) } } };
    }
    return { call, answer: snError(405, 'Method not Supported', `${method} is not supported`) };
  };

  const server = await startTicketStandIn(handle, options.port);
  return {
    ...server,
    user,
    password,
    addChange(number, state, window = {}) {
      const sysId = (nextSysId++).toString(16).padStart(32, 'a');
      const change: ChangeRequest = { sys_id: sysId, number, state, ...window, workNotes: [] };
      changes.set(number, change);
      return change;
    },
    setState(number, state) {
      const change = changes.get(number);
      if (!change) throw new Error(`no change ${number}`);
      change.state = state;
    },
    change: (number) => changes.get(number),
  };
}

function snError(status: number, message: string, detail: string | null): Answer {
  return { status, body: { error: { message, detail }, status: 'failure' } };
}

/** One record as the Table API gives it for `sysparm_display_value` false, true or all. */
function record(change: ChangeRequest, display: string, fields: string[] | undefined, timeZone: string) {
  const stateValue =
    Object.entries(CHANGE_STATES).find(([, name]) => name === change.state)?.[0] ?? change.state;
  const all: Record<string, { value: string; display_value: string }> = {
    sys_id: { value: change.sys_id, display_value: change.sys_id },
    number: { value: change.number, display_value: change.number },
    state: { value: stateValue, display_value: change.state },
    start_date: dateField(change.start, timeZone),
    end_date: dateField(change.end, timeZone),
    short_description: { value: `Change ${change.number}`, display_value: `Change ${change.number}` },
  };
  const out: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(all)) {
    if (fields && !fields.includes(name)) continue;
    out[name] = display === 'all' ? field : display === 'true' ? field.display_value : field.value;
  }
  return out;
}

function dateField(at: Date | undefined, timeZone: string): { value: string; display_value: string } {
  if (!at) return { value: '', display_value: '' };
  const value = at.toISOString().replace('T', ' ').slice(0, 19);
  const parts = new Intl.DateTimeFormat('en-CA', {
    timeZone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
  }).formatToParts(at);
  const get = (type: string) => parts.find((p) => p.type === type)?.value ?? '';
  return {
    value,
    display_value: `${get('year')}-${get('month')}-${get('day')} ${get('hour')}:${get('minute')}:${get('second')}`,
  };
}

/** An encoded query: `^NQ` separates queries (any may match), `^` ANDs conditions, `^OR` ORs with the one before. */
function matches(change: ChangeRequest, query: string): boolean {
  if (query.trim() === '') return true;
  return query.split('^NQ').some((part) => {
    const groups: string[][] = [];
    for (const term of part.split('^')) {
      if (term.startsWith('OR') && groups.length > 0) groups.at(-1)?.push(term.slice(2));
      else groups.push([term]);
    }
    return groups.every((group) => group.some((term) => condition(change, term)));
  });
}

/** One condition; one the stand-in cannot read matches every record, as an instance ignores an invalid condition. */
function condition(change: ChangeRequest, term: string): boolean {
  const m = /^([a-z_]+)(!=|=|LIKE|STARTSWITH)(.*)$/.exec(term);
  if (!m) return true;
  const [, field, op, value = ''] = m;
  const actual = field === 'number' ? change.number : field === 'sys_id' ? change.sys_id : undefined;
  if (actual === undefined) return true;
  if (op === '=') return actual === value;
  if (op === '!=') return actual !== value;
  if (op === 'LIKE') return actual.includes(value);
  return actual.startsWith(value);
}
