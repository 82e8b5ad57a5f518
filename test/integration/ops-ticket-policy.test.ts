import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { START_ARGS } from '../helpers/bot-process.ts';
import { runProcess } from '../helpers/run-process.ts';
import { TEST_SEAL_KEY } from '../helpers/seal.ts';

// `change_ticket` through both doors an operator uses: `npm start` (the compiled bot in its own process), which stops
// on a rule whose ticket system is not configured, and `cloudops policy check`, which shows each project's rule.
const repo = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(repo, 'bin', 'cloudops.mjs');

const ENV = {
  SLACK_BOT_TOKEN: 'xoxb-0000-0000-ticketpolicy',
  SLACK_SIGNING_SECRET: 'ticket-policy-signing-secret',
  CLOUD_API_URL: 'http://127.0.0.1:9/',
  CLOUD_API_KEY: 'ticket-policy-api-key',
  SEAL_KEY: TEST_SEAL_KEY,
};

const POLICY = `approvers: [U0ADMIN]
change_ticket: { system: jira, states: [Approved], projects: [OPS] }
projects:
  - name: shop-prod
    uuid: 0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10
    channels: [C0PROD]
  - name: shop-stage
    uuid: 1b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10
    channels: [C0STAGE]
    change_ticket:
      system: servicenow
      required: false
      for: [restore]
      states: [Scheduled, Implement]
`;

let dir: string;
let file: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cloudops-ticket-policy-'));
  file = join(dir, 'policy.yml');
  await writeFile(file, POLICY);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const run = (args: string[], env: Record<string, string>) =>
  runProcess(process.execPath, args, {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '', ...env },
    timeoutMs: 45_000,
  });

describe.concurrent('change_ticket at start-up and in policy check', { timeout: 120_000 }, () => {
  it('npm start stops with the file, line and field of a rule whose ticket system is not configured', async () => {
    const started = await run(START_ARGS, {
      ...ENV,
      POLICY_FILE: file,
      JIRA_URL: 'https://jira.example',
      JIRA_TOKEN: 'pat-secret-1',
    });
    expect(started.code).toBe(1);
    expect(started.stderr).toBe(
      `cloudops: ${file}:11: projects[1].change_ticket.system: servicenow needs SERVICENOW_URL and its credentials (docs/configuration.md#change-tickets), which are not set: no ticket could be checked\n`,
    );
    expect(started.stderr).not.toContain('pat-secret-1');
  });

  it('policy check shows each project’s rule, and warns of a system the environment does not configure', async () => {
    const checked = await run([BIN, 'policy', 'check', file], ENV);
    expect(checked.code).toBe(0);
    expect(checked.stdout).toContain(
      "approvers U0ADMIN; requesters not set: anyone in the project's channels may ask; change ticket: Jira, in Approved, for resize_up, resize_down, restore (projects OPS)\n",
    );
    expect(checked.stdout).toContain(
      'change ticket: ServiceNow (optional), in Scheduled or Implement, for restore\n',
    );
    expect(checked.stdout).toContain(
      '  warning: change_ticket.system: jira needs JIRA_URL and its credentials (docs/configuration.md#change-tickets), which are not set: no ticket could be checked',
    );
    const json = await run([BIN, 'policy', 'check', file, '--json'], ENV);
    const summary = JSON.parse(json.stdout) as { projects: { changeTicket: unknown }[] };
    expect(summary.projects[1]?.changeTicket).toEqual({
      system: 'servicenow',
      required: false,
      for: ['restore'],
      states: ['Scheduled', 'Implement'],
    });
  });

  it('policy check warns of a Jira rule without projects: a ticket of any project passes, and its states are its own', async () => {
    const open = join(dir, 'jira-any-project.yml');
    await writeFile(
      open,
      POLICY.replace(
        'change_ticket: { system: jira, states: [Approved], projects: [OPS] }',
        'change_ticket: { system: jira, states: [Approved] }',
      ),
    );
    const checked = await run([BIN, 'policy', 'check', open], {
      ...ENV,
      JIRA_URL: 'https://jira.example',
      JIRA_TOKEN: 'pat-secret-2',
    });
    expect(checked.code).toBe(0);
    expect(checked.stdout).toContain(
      '  warning: change_ticket.projects: not set, so a Jira ticket of any project passes; whoever may create a Jira project may give it a status named like one of states (Approved): name the projects (projects: [OPS])',
    );
    expect(checked.stdout).not.toContain('pat-secret-2');
  });
});
