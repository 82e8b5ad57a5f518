/**
 * A Jira stand-in for tests, written from Atlassian's published references: "The Jira Cloud platform REST API"
 * (version 3: Get issue, Add comment with an Atlassian Document Format body, Get current user; Basic auth with an
 * account's email and API token) and "Jira Server / Data Center REST API" (version 2 with a personal access token
 * as `Authorization: Bearer`, a comment body as plain text). Errors have Jira's shape
 * `{"errorMessages":[…],"errors":{…}}`; an unknown key is 404 "Issue does not exist or you do not have permission to
 * see it."; Cloud answers bad credentials 401 in plain text. A key is found case-insensitively and a moved issue
 * answers under its new key, as the reference says Get issue does.
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

export interface JiraIssue {
  id: string;
  key: string;
  /** The status's name as Jira shows it, e.g. "Approved". */
  status: string;
  comments: { id: string; body: unknown; created: string }[];
}

export interface JiraStandInOptions {
  /** `cloud`: Basic email + API token, v3 and v2; `datacenter`: Bearer personal access token, v2 only. */
  flavour?: 'cloud' | 'datacenter';
  email?: string;
  apiToken?: string;
  /** Data Center's personal access token. */
  pat?: string;
  port?: number;
}

export interface JiraStandIn extends StandInBase {
  flavour: 'cloud' | 'datacenter';
  email: string;
  apiToken: string;
  pat: string;
  /** Adds (or replaces) an issue. */
  addIssue(key: string, status: string): JiraIssue;
  /** Moves an issue to another status, as a transition would. */
  setStatus(key: string, status: string): void;
  /** The issue once known as `from` is now `to` (Get issue on `from` answers `to`). */
  move(from: string, to: string): void;
  issue(key: string): JiraIssue | undefined;
}

const NOT_FOUND = 'Issue does not exist or you do not have permission to see it.';

export async function startJiraStandIn(options: JiraStandInOptions = {}): Promise<JiraStandIn> {
  const flavour = options.flavour ?? 'cloud';
  const email = options.email ?? 'bot@example.com';
  const apiToken = options.apiToken ?? 'jira-api-token-test';
  const pat = options.pat ?? 'jira-pat-test';
  const issues = new Map<string, JiraIssue>();
  const moved = new Map<string, string>();
  let nextId = 10_000;
  let base = '';

  const find = (key: string): JiraIssue | undefined => {
    const upper = key.toUpperCase();
    return issues.get(moved.get(upper) ?? upper);
  };

  const authorised = (headers: IncomingMessage['headers']) =>
    flavour === 'cloud'
      ? basicMatches(headers.authorization, email, apiToken)
      : headers.authorization === `Bearer ${pat}`;

  const handle = (method: string, url: URL, headers: IncomingMessage['headers'], body: unknown): Handled => {
    const ok = authorised(headers);
    const call = { auth: describeAuth(headers.authorization), authorised: ok };
    const route = /^\/rest\/api\/(2|3)\/(.*)$/.exec(url.pathname);
    if (!route || (flavour === 'datacenter' && route[1] === '3'))
      return {
        call,
        answer: {
          status: 404,
          text: '<html><body>Oops, you found a dead link.</body></html>',
          contentType: 'text/html',
        },
      };
    if (!ok) return { call, answer: unauthorised(flavour) };
    const version = route[1] as '2' | '3';
    const rest = route[2] ?? '';
    if (method === 'GET' && rest === 'myself')
      return { call, answer: { status: 200, body: myself(flavour, email, base, version) } };
    const issueRoute = /^issue\/([^/]+)(\/comment)?$/.exec(rest);
    if (!issueRoute) return { call, answer: jiraError(404, ['Not found.']) };
    const key = decodeURIComponent(issueRoute[1] ?? '');
    const issue = find(key);
    if (!issue) return { call, answer: jiraError(404, [NOT_FOUND]) };
    if (!issueRoute[2] && method === 'GET')
      return { call, answer: { status: 200, body: issueBody(base, version, issue, url) } };
    if (issueRoute[2] && method === 'POST') return { call, answer: addComment(base, version, issue, body) };
    return { call, answer: { status: 405, text: '' } };
  };

  const server = await startTicketStandIn(handle, options.port);
  base = server.url;
  return {
    ...server,
    flavour,
    email,
    apiToken,
    pat,
    addIssue(key, status) {
      const issue: JiraIssue = { id: String(nextId++), key: key.toUpperCase(), status, comments: [] };
      issues.set(issue.key, issue);
      return issue;
    },
    setStatus(key, status) {
      const issue = find(key);
      if (!issue) throw new Error(`no issue ${key}`);
      issue.status = status;
    },
    move(from, to) {
      moved.set(from.toUpperCase(), to.toUpperCase());
    },
    issue: find,
  };
}

function unauthorised(flavour: 'cloud' | 'datacenter'): Answer {
  if (flavour === 'cloud')
    return {
      status: 401,
      text: 'Client must be authenticated to access this resource.',
      headers: { 'www-authenticate': 'OAuth realm="https%3A%2F%2Fexample.atlassian.net"' },
    };
  return jiraError(401, ['You are not authenticated. Authentication required to perform this operation.']);
}

function jiraError(status: number, errorMessages: string[], errors: Record<string, string> = {}): Answer {
  return { status, body: { errorMessages, errors } };
}

function myself(flavour: 'cloud' | 'datacenter', email: string, base: string, version: string) {
  return flavour === 'cloud'
    ? {
        self: `${base}/rest/api/${version}/user?accountId=5b10a2844c20165700ede21g`,
        accountId: '5b10a2844c20165700ede21g',
        accountType: 'atlassian',
        emailAddress: email,
        displayName: 'cloudops bot',
        active: true,
      }
    : {
        self: `${base}/rest/api/2/user?username=cloudops`,
        key: 'JIRAUSER10100',
        name: 'cloudops',
        emailAddress: email,
        displayName: 'cloudops bot',
        active: true,
      };
}

function issueBody(base: string, version: string, issue: JiraIssue, url: URL) {
  const { id } = issue;
  const statusId = String(10_000 + (issue.status.length % 7));
  const status = {
    self: `${base}/rest/api/${version}/status/${statusId}`,
    description: '',
    iconUrl: `${base}/images/icons/statuses/generic.png`,
    name: issue.status,
    id: statusId,
    statusCategory: {
      self: `${base}/rest/api/${version}/statuscategory/4`,
      id: 4,
      key: 'indeterminate',
      colorName: 'yellow',
      name: 'In Progress',
    },
  };
  // `fields=status` returns that field only, as the reference documents for the `fields` parameter.
  const onlyStatus = (url.searchParams.get('fields') ?? '').split(',').includes('status');
  return {
    expand: 'renderedFields,names,schema,operations,editmeta,changelog,versionedRepresentations',
    id,
    self: `${base}/rest/api/${version}/issue/${id}`,
    key: issue.key,
    fields: onlyStatus
      ? { status }
      : { status, summary: `Change ${issue.key}`, issuetype: { name: 'Change' } },
  };
}

function addComment(base: string, version: string, issue: JiraIssue, body: unknown): Answer {
  const given = (body as { body?: unknown } | undefined)?.body;
  if (version === '3' && !isAdfDoc(given))
    return jiraError(400, [], { comment: 'Comment body is not valid Atlassian Document Format.' });
  if (version === '2' && (typeof given !== 'string' || given.trim() === ''))
    return jiraError(400, [], { comment: 'Comment body can not be empty!' });
  const id = String(20_000 + issue.comments.length);
  const created = new Date().toISOString().replace('Z', '+0000');
  issue.comments.push({ id, body: given, created });
  return {
    status: 201,
    body: {
      self: `${base}/rest/api/${version}/issue/${issue.key}/comment/${id}`,
      id,
      body: given,
      created,
      updated: created,
    },
  };
}

/** The shape the reference gives an ADF document: `{ type: 'doc', version: 1, content: [ nodes ] }`, each node typed. */
function isAdfDoc(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const doc = value as { type?: unknown; version?: unknown; content?: unknown };
  if (doc.type !== 'doc' || doc.version !== 1 || !Array.isArray(doc.content) || doc.content.length === 0)
    return false;
  const typed = (node: unknown): boolean => {
    if (typeof node !== 'object' || node === null) return false;
    const n = node as { type?: unknown; content?: unknown; text?: unknown };
    if (typeof n.type !== 'string') return false;
    if (n.type === 'text' && (typeof n.text !== 'string' || n.text === '')) return false;
    return n.content === undefined || (Array.isArray(n.content) && n.content.every(typed));
  };
  return doc.content.every(typed);
}
