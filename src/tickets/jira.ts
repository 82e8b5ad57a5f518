/**
 * Jira over its REST API: Jira Cloud (version 3, Basic with an account's email and API token; comments in Atlassian
 * Document Format) or Jira Data Center (version 2, a personal access token as Bearer; comments as plain text).
 */
import type { Dispatcher } from 'undici';
import type { ProxyEnv } from '../config/outbound.ts';
import { TicketKeyError, TicketNotFoundError } from './errors.ts';
import { TicketHttp, type TicketTimeouts } from './http.ts';
import { jiraIssueSchema, jiraMyselfSchema } from './schemas.ts';
import type { TicketCallOptions, TicketFacts, TicketNote, TicketSystem } from './types.ts';

/** A Jira issue key: a project key (a letter, then letters, digits or `_`) and a number, e.g. `OPS-123`. */
const JIRA_KEY = /^[A-Z][A-Z0-9_]{0,49}-[1-9][0-9]{0,14}$/;

export type JiraAuth =
  | { kind: 'cloud'; email: string; apiToken: string }
  | { kind: 'datacenter'; token: string }
  | { kind: 'none' };

export interface JiraClientOptions {
  baseUrl: string;
  auth: JiraAuth;
  proxy?: ProxyEnv;
  dispatcher?: Dispatcher;
  timeouts?: TicketTimeouts;
  maxAnswerBytes?: number;
}

/** The key as Jira spells it (upper case), or a {@link TicketKeyError} for anything that is not one. */
export function jiraKey(typed: string): string {
  const key = typed.trim().toUpperCase();
  if (!JIRA_KEY.test(key))
    throw new TicketKeyError(
      shown(typed),
      `${shown(typed)} is not a Jira issue key: expected a project key and a number, such as OPS-123.`,
    );
  return key;
}

export class JiraClient implements TicketSystem {
  readonly name = 'jira' as const;
  private readonly http: TicketHttp;
  private readonly version: '2' | '3';

  constructor(options: JiraClientOptions) {
    const { auth } = options;
    this.version = auth.kind === 'datacenter' ? '2' : '3';
    this.http = new TicketHttp({
      baseUrl: options.baseUrl,
      label: 'Jira',
      authorization:
        auth.kind === 'cloud'
          ? `Basic ${Buffer.from(`${auth.email}:${auth.apiToken}`).toString('base64')}`
          : auth.kind === 'datacenter'
            ? `Bearer ${auth.token}`
            : undefined,
      credentialNames:
        auth.kind === 'datacenter' ? 'JIRA_TOKEN' : 'JIRA_EMAIL and JIRA_API_TOKEN, or JIRA_TOKEN',
      proxy: options.proxy,
      dispatcher: options.dispatcher,
      timeouts: options.timeouts,
      maxAnswerBytes: options.maxAnswerBytes,
    });
  }

  async read(typed: string, options: TicketCallOptions = {}): Promise<TicketFacts> {
    const key = jiraKey(typed);
    const answer = await this.http.call(
      key,
      'GET',
      `/rest/api/${this.version}/issue/${encodeURIComponent(key)}?fields=status`,
      {
        expected: [404],
        ...options,
      },
    );
    if (answer.status === 404)
      throw new TicketNotFoundError(key, `Jira has no issue ${key} (or cloudops may not see it).`);
    const issue = this.http.parse(key, jiraIssueSchema, answer.json);
    // Jira answers a moved issue under its new key: the key checked must be the key stored and shown.
    if (issue.key.toUpperCase() !== key)
      throw new TicketKeyError(
        key,
        `Jira issue ${key} was moved and is now ${shown(issue.key)}; give that key.`,
      );
    return { system: 'jira', key, url: `${this.http.base}/browse/${key}`, state: issue.fields.status.name };
  }

  async note(typed: string, note: TicketNote, options: TicketCallOptions = {}): Promise<void> {
    const key = jiraKey(typed);
    const body = this.version === '3' ? { body: adfDocument(note) } : { body: plainText(note) };
    await this.http.call(key, 'POST', `/rest/api/${this.version}/issue/${encodeURIComponent(key)}/comment`, {
      body,
      ...options,
    });
  }

  async whoAmI(options: TicketCallOptions = {}): Promise<string> {
    const answer = await this.http.call(
      'the credentials',
      'GET',
      `/rest/api/${this.version}/myself`,
      options,
    );
    const me = this.http.parse('the credentials', jiraMyselfSchema, answer.json);
    return me.emailAddress ?? me.name ?? me.displayName ?? me.accountId ?? 'an unnamed account';
  }

  close(): Promise<void> {
    return this.http.close();
  }
}

/** A comment in Atlassian Document Format: one paragraph, the link (when given) as a text node with a link mark. */
export function adfDocument(note: TicketNote) {
  const content: Record<string, unknown>[] = [{ type: 'text', text: note.text }];
  if (note.link) {
    content.push({ type: 'text', text: ' ' });
    content.push({
      type: 'text',
      text: note.link.label,
      marks: [{ type: 'link', attrs: { href: note.link.url } }],
    });
  }
  return { type: 'doc', version: 1, content: [{ type: 'paragraph', content }] };
}

/**
 * Data Center's wiki markup takes `[label|url]` for a link. The text carries words cloudops does not choose (a VM's
 * name, the API's message): its link, image, mention and macro markers are escaped, so they show as typed.
 */
function plainText(note: TicketNote): string {
  const text = note.text.replace(/[\\[\]{}|!]/g, (c) => `\\${c}`);
  return note.link ? `${text} [${note.link.label.replace(/[[\]|]/g, '')}|${note.link.url}]` : text;
}

/** A typed value as a message may show it: short, printable. */
export function shown(typed: string): string {
  const clean = typed.replace(/[^\x20-\x7e]/g, '?').trim();
  return `“${clean.length > 40 ? `${clean.slice(0, 39)}…` : clean}”`.replace(
    /^“([A-Z][A-Z0-9_]*-\d+|[A-Z]+\d+)”$/,
    '$1',
  );
}
