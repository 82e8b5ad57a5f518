/**
 * ServiceNow's Table API on `change_request`, with Basic authentication: a change is read by its number
 * (`sysparm_query=number=CHG…`, display values and values both, so the state's display name and the dates in UTC),
 * and a work note is a PATCH of `work_notes` on its sys_id.
 */
import type { Dispatcher } from 'undici';
import type { ProxyEnv } from '../config/outbound.ts';
import { TicketKeyError, TicketNotFoundError, TicketUnreachableError } from './errors.ts';
import { TicketHttp, type TicketTimeouts } from './http.ts';
import { shown } from './jira.ts';
import { snChangeListSchema, snListSchema, snRecordSchema } from './schemas.ts';
import type { TicketCallOptions, TicketFacts, TicketNote, TicketSystem } from './types.ts';

/**
 * A change number: a prefix of letters and digits, e.g. `CHG0030001`. Nothing an encoded query reads (`^`, `=`, `!`,
 * `<`, spaces) can pass, so the number can never widen the query it is put in.
 */
const CHANGE_NUMBER = /^[A-Z]{2,8}[0-9]{4,12}$/;
const SYS_ID = /^[0-9a-f]{32}$/;
const FIELDS = 'sys_id,number,state,start_date,end_date';

export interface ServiceNowClientOptions {
  baseUrl: string;
  user?: string;
  password?: string;
  proxy?: ProxyEnv;
  dispatcher?: Dispatcher;
  timeouts?: TicketTimeouts;
  maxAnswerBytes?: number;
}

/** The number as ServiceNow spells it, or a {@link TicketKeyError}. */
export function changeNumber(typed: string): string {
  const number = typed.trim().toUpperCase();
  if (!CHANGE_NUMBER.test(number))
    throw new TicketKeyError(
      shown(typed),
      `${shown(typed)} is not a ServiceNow change number: expected letters and digits, such as CHG0030001.`,
    );
  return number;
}

export class ServiceNowClient implements TicketSystem {
  readonly name = 'servicenow' as const;
  private readonly http: TicketHttp;

  constructor(options: ServiceNowClientOptions) {
    this.http = new TicketHttp({
      baseUrl: options.baseUrl,
      label: 'ServiceNow',
      authorization:
        options.user && options.password
          ? `Basic ${Buffer.from(`${options.user}:${options.password}`).toString('base64')}`
          : undefined,
      credentialNames: 'SERVICENOW_USER and SERVICENOW_PASSWORD',
      proxy: options.proxy,
      dispatcher: options.dispatcher,
      timeouts: options.timeouts,
      maxAnswerBytes: options.maxAnswerBytes,
    });
  }

  async read(typed: string, options: TicketCallOptions = {}): Promise<TicketFacts> {
    const { facts } = await this.find(changeNumber(typed), options);
    return facts;
  }

  async note(typed: string, note: TicketNote, options: TicketCallOptions = {}): Promise<void> {
    const { sysId, facts } = await this.find(changeNumber(typed), options);
    // A journal field renders what sits between [code] and [/code] as HTML; the note's words (a VM's name, the API's
    // message) are not cloudops' to choose, so no such marker survives (brackets become parentheses, forming none).
    const said = note.text.replace(/\[(\/?code)\]/gi, '($1)');
    const text = note.link ? `${said} ${note.link.label}: ${note.link.url}` : said;
    const answer = await this.http.call(
      facts.key,
      'PATCH',
      `/api/now/table/change_request/${sysId}?sysparm_fields=sys_id`,
      {
        body: { work_notes: text },
        ...options,
      },
    );
    this.http.parse(facts.key, snRecordSchema, answer.json);
  }

  async whoAmI(options: TicketCallOptions = {}): Promise<string> {
    const answer = await this.http.call(
      'the credentials',
      'GET',
      `/api/now/table/change_request?${new URLSearchParams({ sysparm_limit: '1', sysparm_fields: 'sys_id' })}`,
      options,
    );
    this.http.parse('the credentials', snListSchema, answer.json);
    return 'a user who may read change_request';
  }

  close(): Promise<void> {
    return this.http.close();
  }

  private async find(
    number: string,
    options: TicketCallOptions,
  ): Promise<{ sysId: string; facts: TicketFacts }> {
    const query = new URLSearchParams({
      sysparm_query: `number=${number}`,
      sysparm_display_value: 'all',
      sysparm_exclude_reference_link: 'true',
      sysparm_fields: FIELDS,
      sysparm_limit: '2',
    });
    const answer = await this.http.call(number, 'GET', `/api/now/table/change_request?${query}`, options);
    const { result } = this.http.parse(number, snChangeListSchema, answer.json);
    // Exactly the one record asked for: an instance that ignores a condition it cannot read answers every change.
    const exact = result.filter((r) => r.number.value === number);
    if (exact.length === 0)
      throw new TicketNotFoundError(
        number,
        `ServiceNow has no change request ${number} (or cloudops may not see it).`,
      );
    const record = exact[0];
    if (exact.length > 1 || result.length > 1 || !record || !SYS_ID.test(record.sys_id.value))
      throw new TicketUnreachableError(
        number,
        `ServiceNow answered more than the one change request ${number}, so it could not be checked.`,
      );
    const sysId = record.sys_id.value;
    return {
      sysId,
      facts: {
        system: 'servicenow',
        key: number,
        url: `${this.http.base}/nav_to.do?uri=${encodeURIComponent(`change_request.do?sys_id=${sysId}`)}`,
        state: record.state.display_value,
        window: { start: utc(record.start_date.value), end: utc(record.end_date.value) },
      },
    };
  }
}

/** A glide date-time value (`yyyy-MM-dd HH:mm:ss`, UTC) as ISO 8601; empty when unset or unreadable. */
function utc(value: string): string {
  const m = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})$/.exec(value.trim());
  return m ? `${m[1]}T${m[2]}.000Z` : '';
}
