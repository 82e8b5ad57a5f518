import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type JiraStandIn, startJiraStandIn } from '../../sim/jira/server.ts';
import { type ServiceNowStandIn, startServiceNowStandIn } from '../../sim/servicenow/server.ts';
import type { ChangeTicketPolicy } from '../../src/config/policy.ts';
import { TicketDesk } from '../../src/tickets/desk.ts';
import {
  TicketKeyError,
  TicketNotFoundError,
  TicketUnauthorisedError,
  TicketUnreachableError,
} from '../../src/tickets/errors.ts';
import type { TicketTimeouts } from '../../src/tickets/http.ts';
import { JiraClient } from '../../src/tickets/jira.ts';
import { ServiceNowClient } from '../../src/tickets/servicenow.ts';
import { type ForwardProxy, startForwardProxy } from '../helpers/proxies.ts';

const FAST: TicketTimeouts = { connectMs: 500, headersMs: 800, bodyMs: 800, totalMs: 1_500 };
let jira: JiraStandIn;
let dc: JiraStandIn;
let sn: ServiceNowStandIn;
let proxy: ForwardProxy;

beforeAll(async () => {
  [jira, dc, sn, proxy] = await Promise.all([
    startJiraStandIn(),
    startJiraStandIn({ flavour: 'datacenter' }),
    startServiceNowStandIn(),
    startForwardProxy(),
  ]);
});
afterAll(async () => {
  await Promise.all([jira?.close(), dc?.close(), sn?.close(), proxy?.close()]);
});

const cloudClient = (token = jira.apiToken) =>
  new JiraClient({
    baseUrl: jira.url,
    auth: { kind: 'cloud', email: jira.email, apiToken: token },
    timeouts: FAST,
  });
const snClient = (password = sn.password, maxAnswerBytes?: number) =>
  new ServiceNowClient({ baseUrl: sn.url, user: sn.user, password, timeouts: FAST, maxAnswerBytes });

describe('Jira Cloud (REST v3, Basic email:token)', () => {
  it('reads an issue’s status, with Basic auth naming the email, through GET /rest/api/3/issue/{key}?fields=status', async () => {
    jira.addIssue('OPS-101', 'Approved');
    const client = cloudClient();
    const facts = await client.read('ops-101');
    expect(facts).toEqual({
      system: 'jira',
      key: 'OPS-101',
      url: `${jira.url}/browse/OPS-101`,
      state: 'Approved',
    });
    const call = jira.calls.at(-1);
    expect(call).toMatchObject({
      method: 'GET',
      url: '/rest/api/3/issue/OPS-101?fields=status',
      auth: `Basic ${jira.email}`,
      authorised: true,
    });
    await client.close();
  });

  it('a missing issue is TICKET_NOT_FOUND; a wrong token is TICKET_UNAUTHORISED without the token in the message', async () => {
    await expect(cloudClient().read('OPS-999')).rejects.toBeInstanceOf(TicketNotFoundError);
    const refused = await cloudClient('wrong-token-value')
      .read('OPS-101')
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(TicketUnauthorisedError);
    expect((refused as Error).message).not.toContain('wrong-token-value');
    expect((refused as TicketUnauthorisedError).code).toBe('TICKET_UNAUTHORISED');
  });

  it('comments in Atlassian Document Format, the link as a link mark', async () => {
    const issue = jira.addIssue('OPS-102', 'Approved');
    await cloudClient().note('OPS-102', {
      text: 'Resize succeeded.',
      link: { url: 'https://slack.example/thread', label: 'Slack thread' },
    });
    expect(issue.comments).toHaveLength(1);
    expect(issue.comments[0]?.body).toEqual({
      type: 'doc',
      version: 1,
      content: [
        {
          type: 'paragraph',
          content: [
            { type: 'text', text: 'Resize succeeded.' },
            { type: 'text', text: ' ' },
            {
              type: 'text',
              text: 'Slack thread',
              marks: [{ type: 'link', attrs: { href: 'https://slack.example/thread' } }],
            },
          ],
        },
      ],
    });
  });

  it('a moved issue (Jira answers under its new key) is refused, naming the new key', async () => {
    jira.addIssue('NEW-7', 'Approved');
    jira.move('OLD-7', 'NEW-7');
    const error = await cloudClient()
      .read('OLD-7')
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TicketKeyError);
    expect((error as Error).message).toContain('NEW-7');
  });

  it('goes through HTTPS_PROXY / HTTP_PROXY like every outbound client', async () => {
    const client = new JiraClient({
      baseUrl: jira.url.replace('127.0.0.1', 'localhost'),
      auth: { kind: 'cloud', email: jira.email, apiToken: jira.apiToken },
      proxy: { HTTP_PROXY: proxy.url },
      timeouts: FAST,
    });
    await client.read('OPS-101');
    expect(proxy.calls.some((c) => c.target.includes('/rest/api/3/issue/OPS-101'))).toBe(true);
    await client.close();
  });
});

describe('Jira Data Center (REST v2, Bearer personal access token)', () => {
  it('reads with Bearer on /rest/api/2 and comments in plain text', async () => {
    const issue = dc.addIssue('CHG-5', 'Approved');
    const client = new JiraClient({
      baseUrl: dc.url,
      auth: { kind: 'datacenter', token: dc.pat },
      timeouts: FAST,
    });
    expect((await client.read('CHG-5')).state).toBe('Approved');
    expect(dc.calls.at(-1)).toMatchObject({
      url: '/rest/api/2/issue/CHG-5?fields=status',
      auth: 'Bearer',
      authorised: true,
    });
    await client.note('CHG-5', { text: 'Done.', link: { url: 'https://t.example/x', label: 'thread' } });
    expect(issue.comments[0]?.body).toBe('Done. [thread|https://t.example/x]');
    await client.close();
  });
});

describe('ServiceNow (Table API on change_request, Basic user:password)', () => {
  it('reads the state’s display name and the window in UTC (not the user’s time zone)', async () => {
    sn.addChange('CHG0030001', 'Implement', {
      start: new Date('2026-12-07T10:00:00Z'),
      end: new Date('2026-12-07T12:00:00Z'),
    });
    const facts = await snClient().read('chg0030001');
    expect(facts).toMatchObject({
      system: 'servicenow',
      key: 'CHG0030001',
      state: 'Implement',
      window: { start: '2026-12-07T10:00:00.000Z', end: '2026-12-07T12:00:00.000Z' },
    });
    expect(facts.url).toMatch(/\/nav_to\.do\?uri=change_request\.do%3Fsys_id%3D[0-9a-f]{32}$/);
    const call = sn.calls.at(-1);
    const url = new URL(call?.url ?? '', sn.url);
    expect(url.searchParams.get('sysparm_query')).toBe('number=CHG0030001');
    expect(url.searchParams.get('sysparm_display_value')).toBe('all');
    expect(call?.auth).toBe(`Basic ${sn.user}`);
  });

  it('a number with no record is TICKET_NOT_FOUND; a wrong password TICKET_UNAUTHORISED', async () => {
    await expect(snClient().read('CHG9999999')).rejects.toBeInstanceOf(TicketNotFoundError);
    await expect(snClient('nope').read('CHG0030001')).rejects.toBeInstanceOf(TicketUnauthorisedError);
  });

  it('leaves a work note by PATCH on the sys_id', async () => {
    const change = sn.addChange('CHG0030002', 'Implement');
    await snClient().note('CHG0030002', {
      text: 'Restore succeeded.',
      link: { url: 'https://slack.example/t', label: 'Slack thread' },
    });
    expect(change.workNotes).toEqual(['Restore succeeded. Slack thread: https://slack.example/t']);
    expect(sn.calls.at(-1)).toMatchObject({
      method: 'PATCH',
      url: `/api/now/table/change_request/${change.sys_id}?sysparm_fields=sys_id`,
    });
  });
});

describe('attacks on the ticket key and on the answer', () => {
  it('an encoded-query injection (CHG…^ORnumber=…) is refused before any call; the stand-in shows what it would have matched', async () => {
    sn.addChange('CHG0040001', 'Implement');
    sn.addChange('CHG0040002', 'Review');
    const before = sn.calls.length;
    for (const typed of [
      'CHG0040002^ORnumber=CHG0040001',
      'CHG0040002^NQnumber=CHG0040001',
      'CHG0040002 ',
      'number!=x',
    ])
      if (typed.trim() !== 'CHG0040002')
        await expect(snClient().read(typed)).rejects.toBeInstanceOf(TicketKeyError);
    expect(sn.calls.length).toBe(before);
  });

  it('a Jira key with path traversal or query characters is refused before any call', async () => {
    const before = jira.calls.length;
    for (const typed of [
      '../../myself',
      'OPS-1/../../myself',
      'OPS-1?fields=*all',
      'OPS-1%2F..',
      'OPS-1#x',
      'OPS-0',
      'key = OPS-1 OR 1=1',
    ])
      await expect(cloudClient().read(typed)).rejects.toBeInstanceOf(TicketKeyError);
    expect(jira.calls.length).toBe(before);
  });

  it('a key of another Jira project is refused when the policy names its projects', async () => {
    jira.addIssue('HR-1', 'Approved');
    const desk = new TicketDesk({ jira: cloudClient() });
    const rule: ChangeTicketPolicy = {
      system: 'jira',
      required: true,
      for: ['resize_up'],
      states: ['Approved'],
      projects: ['OPS'],
    };
    const checked = await desk.check(rule, 'HR-1', { stage: 'create', now: new Date() });
    expect(checked).toMatchObject({ ok: false, error: { code: 'TICKET_KEY' } });
    expect(checked && !checked.ok && checked.error.reason).toContain('HR-1 is not a ticket of OPS');
  });

  // The run's note carries the VM's name and the API's words, which a cloud user chooses; the note is the bot's own
  // comment, so their markup must not become a link, an image, a mention or (ServiceNow's [code]) HTML there.
  const HOSTILE_VM =
    'web [Approve here|https://evil.example/x] !https://evil.example/p.png! [~admin] {html}<b>x</b>{html}';

  it('a Data Center note shows a hostile VM name’s wiki markup as text, while the Slack link stays a link', async () => {
    const issue = dc.addIssue('CHG-7', 'Approved');
    const client = new JiraClient({
      baseUrl: dc.url,
      auth: { kind: 'datacenter', token: dc.pat },
      timeouts: FAST,
    });
    await client.note('CHG-7', {
      text: `Resize of VM 101 (${HOSTILE_VM}) in shop, cloudops request r1: succeeded.`,
      link: { url: 'https://t.example/x', label: 'Slack thread' },
    });
    // Unescaped, these open a link, an image, a mention or a macro: each marker is escaped with a backslash.
    expect(issue.comments[0]?.body).toBe(
      String.raw`Resize of VM 101 (web \[Approve here\|https://evil.example/x\] \!https://evil.example/p.png\! \[~admin\] \{html\}<b>x</b>\{html\}) in shop, cloudops request r1: succeeded. [Slack thread|https://t.example/x]`,
    );
    await client.close();
  });

  it('a ServiceNow work note cannot open a [code] block (HTML in the journal) from a hostile VM name', async () => {
    const change = sn.addChange('CHG0030009', 'Implement');
    await snClient().note('CHG0030009', {
      text: 'Resize of VM 101 (web [code]<img src=x onerror=alert(1)>[/CODE] [co[code]de]) in shop: succeeded.',
    });
    expect(change.workNotes).toHaveLength(1);
    expect(change.workNotes[0]).not.toMatch(/\[\/?code\]/i);
    expect(change.workNotes[0]).toContain('<img src=x onerror=alert(1)>');
  });

  it('200 with an HTML login page is unreachable, never a pass', async () => {
    jira.fail({ kind: 'html' }, 1);
    const error = await cloudClient()
      .read('OPS-101')
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TicketUnreachableError);
    expect((error as Error).message).toBe(
      'Jira answered HTTP 200 with an HTML page instead of JSON, so OPS-101 could not be checked.',
    );
  });

  it('a ticket system that hangs is unreachable within the deadline', async () => {
    sn.fail({ kind: 'hang' }, 1);
    const started = Date.now();
    const error = await snClient()
      .read('CHG0030001')
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TicketUnreachableError);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('a body far larger than a ticket is cut off and refused', async () => {
    sn.fail({ kind: 'huge', bytes: 4 * 1024 * 1024 }, 1);
    const error = await snClient(sn.password, 64 * 1024)
      .read('CHG0030001')
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TicketUnreachableError);
    expect((error as Error).message).toContain('more than 64 KiB');
  });

  it('a 503, a dropped connection and a closed port are unreachable', async () => {
    jira.fail({ kind: 'down' }, 1);
    await expect(cloudClient().read('OPS-101')).rejects.toBeInstanceOf(TicketUnreachableError);
    jira.fail({ kind: 'reset' }, 1);
    await expect(cloudClient().read('OPS-101')).rejects.toBeInstanceOf(TicketUnreachableError);
    const closed = new JiraClient({
      baseUrl: 'http://127.0.0.1:9',
      auth: { kind: 'cloud', email: 'a', apiToken: 'b' },
      timeouts: FAST,
    });
    await expect(closed.read('OPS-101')).rejects.toBeInstanceOf(TicketUnreachableError);
  });
});

describe('a ticket system that lies in JSON', () => {
  it('a ServiceNow answering more records than the one asked for (a query it ignored) is refused, not read as the first', async () => {
    const { createServer } = await import('node:http');
    const record = (number: string, sysId: string) => ({
      sys_id: { value: sysId, display_value: sysId },
      number: { value: number, display_value: number },
      state: { value: '-1', display_value: 'Implement' },
      start_date: { value: '2026-12-07 10:00:00', display_value: '' },
      end_date: { value: '2026-12-07 12:00:00', display_value: '' },
    });
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          result: [record('CHG0070001', 'a'.repeat(32)), record('CHG0070002', 'b'.repeat(32))],
        }),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    const client = new ServiceNowClient({
      baseUrl: `http://127.0.0.1:${port}`,
      user: 'u',
      password: 'p',
      timeouts: FAST,
    });
    const error = await client.read('CHG0070001').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TicketUnreachableError);
    expect((error as Error).message).toBe(
      'ServiceNow answered more than the one change request CHG0070001, so it could not be checked.',
    );
    await client.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('a Jira that answers one check with a login page refuses that check, and passes the next once it answers JSON', async () => {
    jira.addIssue('OPS-501', 'Approved');
    const desk = new TicketDesk({ jira: cloudClient() });
    const rule: ChangeTicketPolicy = {
      system: 'jira',
      required: true,
      for: ['restore'],
      states: ['Approved'],
    };
    jira.fail({ kind: 'html' }, 1);
    const lied = await desk.check(rule, 'OPS-501', { stage: 'run', now: new Date() });
    expect(lied).toMatchObject({ ok: false, error: { code: 'TICKET_UNREACHABLE' } });
    const passed = await desk.check(rule, 'OPS-501', { stage: 'run', now: new Date() });
    expect(passed).toMatchObject({ ok: true, key: 'OPS-501', state: 'Approved' });
  });
});

describe('the desk’s judgement of a ServiceNow window', () => {
  const rule: ChangeTicketPolicy = {
    system: 'servicenow',
    required: true,
    for: ['restore'],
    states: ['Scheduled', 'Implement'],
  };
  const at = (iso: string) => new Date(iso);

  it('as the request is made: a window to come is accepted for an immediate run, refused for a scheduled run outside it', async () => {
    sn.addChange('CHG0080001', 'Scheduled', {
      start: at('2026-12-07T20:00:00Z'),
      end: at('2026-12-07T22:00:00Z'),
    });
    const desk = new TicketDesk({ servicenow: snClient() });
    const now = at('2026-12-07T12:00:00Z');
    expect(await desk.check(rule, 'CHG0080001', { stage: 'create', now })).toMatchObject({
      ok: true,
      state: 'Scheduled',
    });
    const scheduled = await desk.check(rule, 'CHG0080001', {
      stage: 'create',
      now,
      runAt: at('2026-12-08T01:00:00Z'),
    });
    expect(scheduled).toMatchObject({
      ok: false,
      error: {
        code: 'TICKET_WINDOW',
        reason:
          "CHG0080001's window (2026-12-07 20:00 UTC to 2026-12-07 22:00 UTC) ends before the run at 2026-12-08 01:00 UTC.",
      },
    });
  });

  it('right before the POST: before the window it says when it opens (a run may wait); without planned dates it refuses', async () => {
    sn.addChange('CHG0080002', 'Implement', {
      start: at('2026-12-07T20:00:00Z'),
      end: at('2026-12-07T22:00:00Z'),
    });
    sn.addChange('CHG0080003', 'Implement');
    const desk = new TicketDesk({ servicenow: snClient() });
    const early = await desk.check(rule, 'CHG0080002', { stage: 'run', now: at('2026-12-07T19:00:00Z') });
    expect(early).toMatchObject({
      ok: false,
      error: { code: 'TICKET_WINDOW', opensAt: at('2026-12-07T20:00:00Z') },
    });
    expect(
      await desk.check(rule, 'CHG0080002', { stage: 'run', now: at('2026-12-07T21:00:00Z') }),
    ).toMatchObject({ ok: true });
    const none = await desk.check(rule, 'CHG0080003', { stage: 'run', now: at('2026-12-07T21:00:00Z') });
    expect(none).toMatchObject({
      ok: false,
      error: {
        reason: 'CHG0080003 has no planned window (its planned start and end dates are not both set).',
      },
    });
  });
});
