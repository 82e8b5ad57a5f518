import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type JiraStandIn, startJiraStandIn } from '../../sim/jira/server.ts';
import { type ServiceNowStandIn, startServiceNowStandIn } from '../../sim/servicenow/server.ts';
import { type DoctorWorld, one, startDoctorWorld } from '../helpers/doctor.ts';

// `cloudops doctor`'s change-ticket checks, as an operator runs it (the shipped binary in a child process), against
// the Jira and ServiceNow stand-ins: the credentials are checked with one read each, and never printed.
const JIRA_TOKEN = 'jira-doctor-token-3f9a';
const SN_PASSWORD = 'sn-doctor-password-81c2';

let world: DoctorWorld;
let jira: JiraStandIn;
let sn: ServiceNowStandIn;
let policyFile: string;

beforeAll(async () => {
  world = await startDoctorWorld('cloudops-doctor-tickets-', [JIRA_TOKEN, SN_PASSWORD, 'wrong-jira-token-1']);
  [jira, sn] = await Promise.all([
    startJiraStandIn({ apiToken: JIRA_TOKEN }),
    startServiceNowStandIn({ password: SN_PASSWORD }),
  ]);
  policyFile = join(world.dir, 'tickets-policy.yml');
  await writeFile(
    policyFile,
    `approvers: [U0ADMIN]
change_ticket: { system: jira, states: [Approved] }
projects:
  - name: shop-prod
    uuid: 0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10
    channels: [C0PROD]
  - name: shop-stage
    uuid: 1b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10
    channels: [C0OPS]
    change_ticket: { system: servicenow, states: [Implement] }
`,
  );
});
afterAll(async () => {
  await Promise.all([world?.close(), jira?.close(), sn?.close()]);
});

const ticketEnv = () => ({
  POLICY_FILE: policyFile,
  JIRA_URL: jira.url,
  JIRA_EMAIL: jira.email,
  JIRA_API_TOKEN: JIRA_TOKEN,
  SERVICENOW_URL: sn.url,
  SERVICENOW_USER: sn.user,
  SERVICENOW_PASSWORD: SN_PASSWORD,
});

describe('cloudops doctor: change tickets', () => {
  it('reads with each system’s credentials: Jira’s current user, one ServiceNow change request', async () => {
    const { checks } = await world.checks(ticketEnv());
    expect(one(checks, 'tickets.jira')).toMatchObject({
      status: 'ok',
      summary: `Jira: the credentials read, as ${jira.email}`,
    });
    expect(one(checks, 'tickets.servicenow').status).toBe('ok');
    expect(jira.callsTo('GET', '/rest/api/3/myself').at(-1)).toMatchObject({ authorised: true });
    expect(sn.callsTo('GET', '/api/now/table/change_request').at(-1)).toMatchObject({ authorised: true });
  });

  it('a refused token, and a system the policy names without its URL: ✗ each with the fix', async () => {
    const { code, checks } = await world.checks({
      ...ticketEnv(),
      JIRA_API_TOKEN: 'wrong-jira-token-1',
      SERVICENOW_URL: '',
      SERVICENOW_USER: '',
      SERVICENOW_PASSWORD: '',
    });
    expect(code).toBe(1);
    expect(one(checks, 'tickets.jira')).toMatchObject({
      status: 'fail',
      fix: expect.stringContaining('JIRA_EMAIL and JIRA_API_TOKEN'),
    });
    expect(one(checks, 'tickets.jira').summary).toContain('HTTP 401');
    expect(one(checks, 'tickets.environment')).toMatchObject({
      status: 'fail',
      summary: expect.stringContaining(
        'projects[1].change_ticket.system: servicenow needs SERVICENOW_URL',
      ) as unknown,
    });
  });

  it('a ticket system that is down is a failure naming it, not a pass', async () => {
    sn.fail({ kind: 'down' }, 1);
    const { checks } = await world.checks(ticketEnv());
    expect(one(checks, 'tickets.servicenow')).toMatchObject({
      status: 'fail',
      summary: expect.stringContaining('unavailable (HTTP 503)') as unknown,
    });
  });
});
