import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type JiraStandIn, startJiraStandIn } from '../../sim/jira/server.ts';
import { type ServiceNowStandIn, startServiceNowStandIn } from '../../sim/servicenow/server.ts';
import { newAgentToken, tokenHash } from '../../src/config/agents.ts';
import { CHANNELS, defaultPolicyYaml, type Harness, startHarness, USERS } from '../helpers/harness.ts';

// Change tickets through the whole bot (ROLE=all): signed Slack requests, the cloud sim, the Slack stand-in, and the
// Jira Cloud and ServiceNow stand-ins. shop-prod asks for a Jira ticket of project OPS in Approved; shop-staging (no
// approvals) for a ServiceNow change in Scheduled or Implement whose window holds the run.
const JIRA_TOKEN = 'jira-e2e-token-4c1d9e';
const SN_PASSWORD = 'sn-e2e-password-77b0';
const HOUR = 3_600_000;
const AGENT_TOKEN = newAgentToken();

let h: Harness;
let jira: JiraStandIn;
let sn: ServiceNowStandIn;

/** The default policy with a change-ticket rule in each project, after its `channels:` line. */
function ticketPolicy(start: Date): string {
  return defaultPolicyYaml(start)
    .replace(
      `    channels: [${CHANNELS.prod}]\n`,
      `    channels: [${CHANNELS.prod}]\n    change_ticket: { system: jira, states: [Approved], projects: [OPS] }\n`,
    )
    .replace(
      `    channels: [${CHANNELS.staging}]\n`,
      `    channels: [${CHANNELS.staging}]\n    change_ticket: { system: servicenow, states: [Scheduled, Implement] }\n`,
    )
    .concat(`agents:
  - name: deploy-agent
    token_sha256: ${tokenHash(AGENT_TOKEN)}
    on_behalf_of: ${USERS.dev}
    projects: [shop-prod, shop-staging]
    may: [resize_up, resize_down, restore]
`);
}

beforeAll(async () => {
  [jira, sn] = await Promise.all([
    startJiraStandIn({ apiToken: JIRA_TOKEN }),
    startServiceNowStandIn({ password: SN_PASSWORD }),
  ]);
  h = await startHarness({
    role: 'all',
    policyYaml: ticketPolicy,
    startOptions: { ticketRetryMs: 300 },
    env: () => ({
      MCP_PORT: '0',
      JIRA_URL: jira.url,
      JIRA_EMAIL: jira.email,
      JIRA_API_TOKEN: JIRA_TOKEN,
      SERVICENOW_URL: sn.url,
      SERVICENOW_USER: sn.user,
      SERVICENOW_PASSWORD: SN_PASSWORD,
    }),
  });
});
afterEach(() => {
  expect(h.slack.problems).toEqual([]);
  jira.heal();
  sn.heal();
});
afterAll(async () => {
  const all = h ? h.logs.join('\n') : '';
  expect(all).not.toContain(JIRA_TOKEN);
  expect(all).not.toContain(SN_PASSWORD);
  await h?.close();
  await Promise.all([jira?.close(), sn?.close()]);
});

const allText = (value: unknown) => JSON.stringify(value);

/** Waits until the request's audit has a line containing `text` (up to 30 s). */
async function auditSays(requestId: string, text: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await h.auditOf(requestId)).some((line) => line.includes(text))) {
    if (Date.now() > deadline) throw new Error(`no audit line of ${requestId} says ${text}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('Jira Cloud: the ticket is checked when the request is made', () => {
  it('ticket=KEY fills the form; an Approved ticket is stored, linked on the message and audited', async () => {
    jira.addIssue('OPS-1', 'Approved');
    const view = await h.openModal('resize shop-prod 102 cores=6 ticket=OPS-1');
    expect(allText(view)).toContain('"initial_value":"OPS-1"');
    expect(allText(view)).toContain('Required: a Jira issue key such as OPS-123, in Approved.');
    const ack = await h.submitView(view, { ticket: 'OPS-1', reason: 'more traffic' }, USERS.dev);
    expect(ack.json).toEqual({ response_action: 'clear' });
    const request = await h.nextRequest();
    expect(request.ticket).toEqual({
      system: 'jira',
      key: 'OPS-1',
      url: `${jira.url}/browse/OPS-1`,
      state: 'Approved',
    });
    const message = await h.requestMessage(request.id);
    expect(allText(message.blocks)).toContain(`*Change ticket:* <${jira.url}/browse/OPS-1|OPS-1> (Approved)`);
    expect((await h.auditOf(request.id))[0]).toContain('ticket OPS-1 (Approved)');
    expect(jira.callsTo('GET', '/rest/api/3/issue/OPS-1').at(-1)).toMatchObject({
      url: '/rest/api/3/issue/OPS-1?fields=status',
      auth: `Basic ${jira.email}`,
      authorised: true,
    });
  });

  it('a ticket in another state is a field error naming it and its state; nothing is stored', async () => {
    jira.addIssue('OPS-2', 'In Progress');
    const before = (await h.requests()).length;
    const ack = await h.fillAndSubmit('resize shop-prod 102 cores=6', { ticket: 'OPS-2' });
    expect(ack.json).toEqual({
      response_action: 'errors',
      errors: { ticket: 'OPS-2 is in state “In Progress”; this change needs it in “Approved”.' },
    });
    expect((await h.requests()).length).toBe(before);
  });

  it('no ticket, an unknown one, one of another Jira project, and injection in the key: each a field error', async () => {
    jira.addIssue('HR-7', 'Approved');
    const errorOf = async (ticket: string | undefined) => {
      const ack = await h.fillAndSubmit(
        'resize shop-prod 102 cores=6',
        ticket === undefined ? {} : { ticket },
      );
      return (ack.json as { errors?: Record<string, string> }).errors?.ticket;
    };
    expect(await errorOf(undefined)).toBe(
      'This change needs a Jira change ticket in Approved: give its key.',
    );
    expect(await errorOf('OPS-404')).toBe('Jira has no issue OPS-404 (or cloudops may not see it).');
    expect(await errorOf('HR-7')).toBe(
      "HR-7 is not a ticket of OPS, the Jira projects this change's tickets come from.",
    );
    const calls = jira.calls.length;
    expect(await errorOf('OPS-1/../../myself')).toMatch(/is not a Jira issue key/);
    expect(await errorOf('OPS-1?fields=*all')).toMatch(/is not a Jira issue key/);
    expect(jira.calls.length).toBe(calls);
  });

  it('Jira down, lying with HTML or hanging: a clear refusal within Slack’s 3 s, never a pass', async () => {
    jira.addIssue('OPS-3', 'Approved');
    jira.fail({ kind: 'down' });
    let ack = await h.fillAndSubmit('resize shop-prod 102 cores=6', { ticket: 'OPS-3' });
    expect(ack.json).toEqual({
      response_action: 'errors',
      errors: { ticket: 'Jira is unavailable (HTTP 503), so OPS-3 could not be checked.' },
    });
    jira.fail({ kind: 'html' });
    ack = await h.fillAndSubmit('resize shop-prod 102 cores=6', { ticket: 'OPS-3' });
    expect(allText(ack.json)).toContain('Jira answered HTTP 200 with an HTML page instead of JSON');
    jira.fail({ kind: 'hang' });
    const started = Date.now();
    ack = await h.fillAndSubmit('resize shop-prod 102 cores=6', { ticket: 'OPS-3' });
    expect(Date.now() - started).toBeLessThan(6_000);
    expect(allText(ack.json)).toContain('Jira did not answer within 2 s, so OPS-3 could not be checked.');
  });
});

describe('Jira Cloud: read again before the POST, and commented after the run', () => {
  it('an approved request runs, and the issue gets an ADF comment with the outcome and the thread’s link', async () => {
    const issue = jira.addIssue('OPS-10', 'Approved');
    await h.fillAndSubmit('resize shop-prod 102 cores=6', { ticket: 'OPS-10' });
    const request = await h.nextRequest();
    const message = await h.requestMessage(request.id);
    await h.click('approve', request.id, USERS.lead, CHANNELS.prod, message);
    await h.waitForRequest(request.id, (r) => r.state === 'succeeded', 30_000);
    await h.slack.waitFor(() => issue.comments.length > 0 || undefined, 30_000);
    const body = allText(issue.comments[0]?.body);
    expect(body).toContain('"type":"doc"');
    expect(body).toContain(`Resize of VM 102 (db-1) in shop-prod, cloudops request ${request.id}: succeeded`);
    expect(body).toContain(
      `"href":"https://cloudops-test.slack.com/archives/${CHANNELS.prod}/p${message.ts.replace('.', '')}"`,
    );
    // Read twice: when the request was made and right before the POST.
    expect(jira.callsTo('GET', '/rest/api/3/issue/OPS-10')).toHaveLength(2);
  });

  it('a ticket whose state changed after the approval refuses the run: nothing is sent, the thread and the ticket say why', async () => {
    const issue = jira.addIssue('OPS-11', 'Approved');
    await h.fillAndSubmit('resize shop-prod 104 ram=4', { ticket: 'OPS-11' });
    const request = await h.nextRequest();
    const message = await h.requestMessage(request.id);
    jira.setStatus('OPS-11', 'Closed');
    await h.click('approve', request.id, USERS.lead, CHANNELS.prod, message);
    const refused = await h.waitForRequest(request.id, (r) => r.state === 'refused', 30_000);
    expect(refused.outcomes.at(-1)).toMatchObject({
      notSent: true,
      reason: 'Not sent: OPS-11 is in state “Closed”; this change needs it in “Approved”.',
    });
    expect(h.sim.applied.filter((a) => a.vmid === 104)).toHaveLength(0);
    await h.slack.waitFor(() => issue.comments.length > 0 || undefined, 30_000);
    expect(allText(issue.comments[0]?.body)).toContain('refused before anything was sent');
  });

  it('Jira unreachable before the POST holds the run and tries again; it runs once Jira answers', async () => {
    jira.addIssue('OPS-12', 'Approved');
    await h.fillAndSubmit('resize shop-prod 101 disk=70', { ticket: 'OPS-12' });
    const request = await h.nextRequest();
    const message = await h.requestMessage(request.id);
    jira.fail({ kind: 'down' });
    await h.click('approve', request.id, USERS.lead, CHANNELS.prod, message);
    await auditSays(request.id, 'held by the change ticket');
    expect(h.sim.applied.filter((a) => a.vmid === 101 && a.route === 'resize')).toHaveLength(0);
    jira.heal();
    await h.waitForRequest(request.id, (r) => r.state === 'succeeded', 30_000);
  });

  it('still unreachable when the approval’s validity ends: the request ends refused', async () => {
    jira.addIssue('OPS-13', 'Approved');
    await h.fillAndSubmit('resize shop-prod 101 disk=80', { ticket: 'OPS-13' });
    const request = await h.nextRequest();
    const message = await h.requestMessage(request.id);
    jira.fail({ kind: 'down' });
    await h.click('approve', request.id, USERS.lead, CHANNELS.prod, message);
    await auditSays(request.id, 'held by the change ticket');
    h.clock.advance(25 * HOUR);
    const refused = await h.waitForRequest(request.id, (r) => r.state === 'refused', 30_000);
    expect(refused.outcomes.at(-1)?.reason).toMatch(
      /^Not sent: Jira is unavailable \(HTTP 503\), so OPS-13 could not be checked\. The approval was valid until .+ UTC\.$/,
    );
    expect(
      h.sim.applied.filter(
        (a) =>
          a.vmid === 101 &&
          a.route === 'resize' &&
          (a.body as { os_disk?: number } | undefined)?.os_disk === 80,
      ),
    ).toHaveLength(0);
  });
});

describe('ServiceNow: the planned window', () => {
  it('a change whose window has ended is refused at creation, naming its start and end', async () => {
    const now = h.clock.now().getTime();
    sn.addChange('CHG0050001', 'Implement', { start: new Date(now - 5 * HOUR), end: new Date(now - HOUR) });
    const view = await h.openModal(
      'restore shop-staging 201 nightly_2025-01-01 ticket=CHG0050001',
      USERS.dev,
      CHANNELS.staging,
    );
    const ack = await h.submitView(
      view,
      { confirm: ['stopped'], typed_vmid: '201', ticket: 'CHG0050001' },
      USERS.dev,
    );
    const start = new Date(now - 5 * HOUR).toISOString().slice(0, 16).replace('T', ' ');
    const end = new Date(now - HOUR).toISOString().slice(0, 16).replace('T', ' ');
    expect(ack.json).toEqual({
      response_action: 'errors',
      errors: { ticket: `CHG0050001's window (${start} UTC to ${end} UTC) has ended.` },
    });
  });

  it('a change in its window and state runs (no approval needed), and gets a work note with the outcome', async () => {
    const now = h.clock.now().getTime();
    const change = sn.addChange('CHG0050002', 'Implement', {
      start: new Date(now - HOUR),
      end: new Date(now + HOUR),
    });
    const view = await h.openModal(
      'restore shop-staging 201 nightly_2025-01-01',
      USERS.dev,
      CHANNELS.staging,
    );
    const ack = await h.submitView(
      view,
      { confirm: ['stopped'], typed_vmid: '201', ticket: 'chg0050002' },
      USERS.dev,
    );
    expect(ack.json).toEqual({ response_action: 'clear' });
    const request = await h.nextRequest(CHANNELS.staging);
    expect(request.ticket).toMatchObject({ system: 'servicenow', key: 'CHG0050002', state: 'Implement' });
    await h.waitForRequest(request.id, (r) => r.state === 'succeeded', 30_000);
    await h.slack.waitFor(() => change.workNotes.length > 0 || undefined, 30_000);
    expect(change.workNotes[0]).toMatch(
      new RegExp(
        `^Restore of VM 201 \\(staging-1\\) in shop-staging, cloudops request ${request.id}: succeeded \\(task .+ Slack thread: https://cloudops-test\\.slack\\.com/archives/${CHANNELS.staging}/p\\d+$`,
      ),
    );
    const url = new URL(sn.callsTo('GET', '/api/now/table/change_request').at(-1)?.url ?? '', sn.url);
    expect(url.searchParams.get('sysparm_query')).toBe('number=CHG0050002');
  });

  it('an encoded-query injection in the number is refused before ServiceNow is asked', async () => {
    const calls = sn.calls.length;
    const view = await h.openModal(
      'restore shop-staging 201 nightly_2025-01-01',
      USERS.dev,
      CHANNELS.staging,
    );
    const ack = await h.submitView(
      view,
      { confirm: ['stopped'], typed_vmid: '201', ticket: 'CHG0050001^ORnumber=CHG0050002' },
      USERS.dev,
    );
    expect(allText(ack.json)).toContain('is not a ServiceNow change number');
    expect(sn.calls.length).toBe(calls);
  });
});

describe('MCP: the request tools take `ticket`', () => {
  let client: Client;
  beforeAll(async () => {
    client = new Client({ name: 'ticket-agent', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${h.bot.mcpPort}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${AGENT_TOKEN}` } },
    });
    await client.connect(transport as Transport);
  });
  afterAll(async () => {
    await client?.close();
  });
  const call = async (name: string, args: Record<string, unknown>) =>
    (await client.callTool({ name, arguments: args })) as CallToolResult;
  const textOf = (result: CallToolResult) =>
    result.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');

  it('request_resize with an Approved ticket makes the request with it; without one, or in another state, it is refused', async () => {
    jira.addIssue('OPS-30', 'Approved');
    jira.addIssue('OPS-31', 'Open');
    const resize = { project: 'shop-prod', vm_id: 102, cores: 8, reason: 'agent load test' };
    const missing = await call('request_resize', resize);
    expect(missing.isError).toBe(true);
    expect(textOf(missing)).toBe(
      'Not requested: This change needs a Jira change ticket in Approved: give its key.',
    );
    const wrong = await call('request_resize', { ...resize, ticket: 'OPS-31' });
    expect(textOf(wrong)).toBe(
      'Not requested: OPS-31 is in state “Open”; this change needs it in “Approved”.',
    );
    const made = await call('request_resize', { ...resize, ticket: 'OPS-30' });
    expect(made.isError).toBeFalsy();
    const id = (made.structuredContent as { request_id: string }).request_id;
    expect((await h.store.get(id))?.ticket).toMatchObject({ key: 'OPS-30', state: 'Approved' });
  });

  it('request_restore refuses a ServiceNow change whose window has ended', async () => {
    const now = h.clock.now().getTime();
    sn.addChange('CHG0060001', 'Scheduled', {
      start: new Date(now - 3 * HOUR),
      end: new Date(now - 2 * HOUR),
    });
    const result = await call('request_restore', {
      project: 'shop-staging',
      vm_id: 201,
      backup: 'nightly_2025-01-01',
      vm_stopped: true,
      reason: 'agent restore',
      ticket: 'CHG0060001',
    });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/^Not requested: CHG0060001's window \(.+ UTC to .+ UTC\) has ended\.$/);
  });
});

describe('Jira Data Center: a personal access token as Bearer, REST API v2', () => {
  let dc: JiraStandIn;
  let web: Harness;
  beforeAll(async () => {
    dc = await startJiraStandIn({ flavour: 'datacenter', pat: 'jira-dc-pat-e2e-51aa' });
    web = await startHarness({
      policyYaml: ticketPolicy,
      env: () => ({ JIRA_URL: dc.url, JIRA_TOKEN: 'jira-dc-pat-e2e-51aa' }),
    });
  });
  afterAll(async () => {
    await web?.close();
    await dc?.close();
  });

  it('the form’s ticket is read with Bearer on /rest/api/2 and stored', async () => {
    dc.addIssue('OPS-40', 'Approved');
    const ack = await web.fillAndSubmit('resize shop-prod 102 cores=6', { ticket: 'OPS-40' });
    expect(ack.json).toEqual({ response_action: 'clear' });
    const request = await web.nextRequest();
    expect(request.ticket).toEqual({
      system: 'jira',
      key: 'OPS-40',
      url: `${dc.url}/browse/OPS-40`,
      state: 'Approved',
    });
    expect(dc.calls.at(-1)).toMatchObject({
      url: '/rest/api/2/issue/OPS-40?fields=status',
      auth: 'Bearer',
      authorised: true,
    });
    expect(web.logs.join('\n')).not.toContain('jira-dc-pat-e2e-51aa');
  });
});
