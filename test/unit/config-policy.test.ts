import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  approvalsOf,
  approvalValidHoursOf,
  approversOf,
  breakGlassOf,
  changeTicketOf,
  findProject,
  freezeOf,
  loadPolicy,
  PolicyError,
  parsePolicy,
  userGroupsOf,
} from '../../src/config/policy.ts';
import { ruleMatches } from '../../src/requests/approval/approval-rules.ts';

/** A policy with every top-level key (docs/policy.md), with line numbers the tests below rely on. */
const GOOD = `workspace: T0001
currency: EUR
approvers: [U0ADMIN]
approval_ttl_hours: 24
resize_fields:
  cpu_class: { field: cpu_type, values: [regular, light] }
  private_network: { field: private_network, values: [off, on] }
projects:
  - name: shop-prod
    uuid: 0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10
    cluster: zone-1
    channels: [C0PROD]
    approvers: [U0LEAD]
    approval: { resize_up: required, resize_down: required, restore: required }
    vms:
      - { vmid: 101, name: web-1, ha: true, cores: 2, ram_gb: 4, os_disk_gb: 50, wan_mode: ipv4 }
`;

/** Replaces one line (1-based) of GOOD. */
function withLine(line: number, text: string): string {
  const lines = GOOD.split('\n');
  lines[line - 1] = text;
  return lines.join('\n');
}

function failure(text: string, source = 'policy.yml'): string {
  try {
    parsePolicy(text, source);
  } catch (error) {
    if (error instanceof PolicyError) return error.message;
    throw error;
  }
  throw new Error('the policy was accepted');
}

describe('parsePolicy', () => {
  it('reads the documented example, with defaults for limits and the reference VM', () => {
    const policy = parsePolicy(GOOD, 'policy.yml');
    const project = findProject(policy, 'SHOP-PROD');
    expect(project?.uuid).toBe('0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10');
    expect(findProject(policy, '0B6F7C1E-3D2A-4C55-9A53-2F1A4E8B9C10')).toBe(project);
    expect(project && approversOf(policy, project)).toEqual(['U0LEAD']);
    expect(project?.vms[0]).toMatchObject({ vmid: 101, ha: true, wan_mode: 'ipv4' });
    expect(policy.resize_fields.cpu_class).toEqual({ field: 'cpu_type', values: ['regular', 'light'] });
    expect(policy.limits).toEqual({ cores: 64, ram_gb: 512, os_disk_gb: 4096 });
    expect(policy.reference_vm).toEqual({
      cores: 2,
      ram_gb: 4,
      os_disk_gb: 50,
      cpu_class: 'regular',
      public_ip: true,
    });
  });

  it.each([
    [10, '    uuid: not-a-uuid', 'policy.yml:10: projects[0].uuid: expected a UUID'],
    [12, '    channels: [general]', 'policy.yml:12: projects[0].channels[0]: expected a Slack channel id'],
    [3, 'approvers: [bob]', 'policy.yml:3: approvers[0]: expected a Slack user id'],
    [1, 'workspace: acme', 'policy.yml:1: workspace: expected a Slack team id'],
    [16, '      - { vmid: 101, cores: two }', 'policy.yml:16: projects[0].vms[0].cores:'],
    [16, '      - { vmid: -1 }', 'policy.yml:16: projects[0].vms[0].vmid:'],
    [16, '      - { vmid: 101, wan_mode: ipv5 }', 'policy.yml:16: projects[0].vms[0].wan_mode:'],
    [16, '      - { vmid: 101, created_at: yesterday }', 'policy.yml:16: projects[0].vms[0].created_at:'],
    [
      6,
      '  cpu_class: { field: cpu_type, values: [fast] }',
      'policy.yml:6: resize_fields.cpu_class.values: expected 2 values',
    ],
    [14, '    approval: { resize_up: maybe }', 'policy.yml:14: projects[0].approval.resize_up:'],
  ])('names file:line:field for a bad value on line %d', (line, text, expected) => {
    expect(failure(withLine(line, text))).toContain(expected);
  });

  it('keeps ended requests retention_days (1 to 3650, default 90) and names the line of a bad value', () => {
    expect(parsePolicy(GOOD).retention_days).toBe(90);
    expect(parsePolicy(withLine(4, 'retention_days: 30')).retention_days).toBe(30);
    expect(failure(withLine(4, 'retention_days: 0'))).toBe(
      'policy.yml:4: retention_days: expected a number of days from 1 to 3650',
    );
    expect(failure(withLine(4, 'retention_days: 3651'))).toBe(
      'policy.yml:4: retention_days: expected a number of days from 1 to 3650',
    );
    expect(failure(withLine(4, 'retention_days: 1.5'))).toBe(
      'policy.yml:4: retention_days: expected a whole number of days',
    );
    expect(failure(withLine(4, 'retention_days: soon'))).toBe(
      'policy.yml:4: retention_days: expected a number of days from 1 to 3650',
    );
  });

  it('approval_valid_hours: default 24, a project may set its own, a bad value names its line', () => {
    const policy = parsePolicy(withLine(4, 'approval_valid_hours: 2'));
    expect(parsePolicy(GOOD).approval_valid_hours).toBe(24);
    expect(policy.approval_valid_hours).toBe(2);
    const project = policy.projects[0];
    expect(project && approvalValidHoursOf(policy, project)).toBe(2);
    const own = parsePolicy(GOOD.replace('    channels:', '    approval_valid_hours: 0.5\n    channels:'));
    const ownProject = own.projects[0];
    expect(ownProject && approvalValidHoursOf(own, ownProject)).toBe(0.5);
    expect(failure(withLine(4, 'approval_valid_hours: 0'))).toBe(
      'policy.yml:4: approval_valid_hours: expected a number of hours from above 0 to 720',
    );
    expect(failure(withLine(4, 'approval_valid_hours: 721'))).toBe(
      'policy.yml:4: approval_valid_hours: expected a number of hours from above 0 to 720',
    );
  });

  it('refuses limits larger than the modal inputs hold, so the command line and the form agree (issue 17.7)', () => {
    expect(parsePolicy(withLine(4, 'limits: { cores: 999999, os_disk_gb: 9999999 }')).limits).toMatchObject({
      cores: 999999,
      os_disk_gb: 9999999,
    });
    expect(failure(withLine(4, 'limits: { os_disk_gb: 10000000 }'))).toBe(
      "policy.yml:4: limits.os_disk_gb: expected at most 9999999 (the most the modal's input takes)",
    );
    expect(failure(withLine(4, 'limits: { cores: 1000000 }'))).toMatch(
      /limits\.cores: expected at most 999999/,
    );
  });

  it('names an unknown key on its own line with the closest known key, or the keys known there', () => {
    expect(failure(withLine(11, '    clutser: zone-1'))).toBe(
      'policy.yml:11: projects[0].clutser: unknown key, did you mean `cluster`?',
    );
    expect(failure(`${GOOD}colour: blue\n`)).toBe(
      'policy.yml:17: colour: unknown key; the keys here are workspace, currency, approvers, approvals, freeze, break_glass, requests_per_hour, approval_ttl_hours, approval_valid_hours, retention_days, audit_retention_days, limits, resize_fields, reference_vm, projects, agents, change_ticket',
    );
  });

  it('reports a misspelt required key as the typo alone, not also as the key it meant being missing', () => {
    expect(failure(withLine(12, '    chanels: [C0PROD]'))).toBe(
      'policy.yml:12: projects[0].chanels: unknown key, did you mean `channels`?',
    );
    // A key with no close match leaves the missing one reported too.
    expect(failure(withLine(12, '    rooms: [C0PROD]')).split('\n')).toEqual([
      'policy.yml: 2 problems:',
      '  policy.yml:9: projects[0].channels: missing: expected a list of channel ids',
      '  policy.yml:12: projects[0].rooms: unknown key; the keys here are name, uuid, cluster, channels, approvers, approval, vms, approvals, freeze, break_glass, approval_valid_hours, requesters, change_ticket',
    ]);
  });

  it('reports every problem at once, in file order, each with file:line and field', () => {
    const text = GOOD.replace('approvers: [U0ADMIN]', 'aprovers: [U0ADMIN]')
      .replace('approval_ttl_hours: 24', 'approval_ttl_hours: soon')
      .replace('    channels: [C0PROD]', '    chanels: [C0PROD]')
      .replace('{ vmid: 101, name: web-1,', '{ vmid: "102", name: 7,');
    expect(failure(text).split('\n')).toEqual([
      'policy.yml: 5 problems:',
      '  policy.yml:3: aprovers: unknown key, did you mean `approvers`?',
      '  policy.yml:4: approval_ttl_hours: expected a number, not the text "soon"',
      '  policy.yml:12: projects[0].chanels: unknown key, did you mean `channels`?',
      '  policy.yml:16: projects[0].vms[0].vmid: expected a whole number, not the text "102" (write it without quotes)',
      '  policy.yml:16: projects[0].vms[0].name: expected text, not 7',
    ]);
  });

  it('lists the first 20 problems and counts the rest', () => {
    const vms = Array.from({ length: 25 }, (_, i) => `      - { vmid: ${i + 1}, cores: many }`).join('\n');
    const text = GOOD.replace(/ {6}- \{ vmid: 101.*\n/, `${vms}\n`);
    const lines = failure(text).split('\n');
    expect(lines[0]).toBe('policy.yml: 25 problems, the first 20 listed:');
    expect(lines).toHaveLength(21);
    expect(lines[1]).toBe(
      '  policy.yml:16: projects[0].vms[0].cores: expected a whole number, not the text "many"',
    );
    expect(lines[20]).toBe(
      '  policy.yml:35: projects[0].vms[19].cores: expected a whole number, not the text "many"',
    );
    const error = (() => {
      try {
        parsePolicy(text, 'policy.yml');
      } catch (caught) {
        return caught;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(PolicyError);
    expect((error as PolicyError).problems).toHaveLength(20);
    expect((error as PolicyError).total).toBe(25);
    expect((error as PolicyError).summary).toBe(
      'policy.yml: 25 problems, the first: policy.yml:16: projects[0].vms[0].cores: expected a whole number, not the text "many"',
    );
  });

  it.each([
    [
      '    channels: C0PROD',
      'policy.yml:12: projects[0].channels: expected a list of channel ids, not the text "C0PROD"',
    ],
    [
      '    approvers: U0LEAD',
      'policy.yml:13: projects[0].approvers: expected a list of user or user group ids, not the text "U0LEAD"',
    ],
    ['    channels: [[C0PROD]]', 'policy.yml:12: projects[0].channels[0]: expected a channel id, not a list'],
    ['    uuid: 42', 'policy.yml:10: projects[0].uuid: expected a UUID, not 42'],
  ])('words a wrong type as a person would: %s', (text, expected) => {
    const line = GOOD.split('\n').findIndex((l) => l.startsWith(text.split(':')[0] as string)) + 1;
    expect(failure(withLine(line, text))).toBe(expected);
  });

  it('names a list of projects, a whole number and a VM in words', () => {
    expect(failure('projects: { name: shop }\n')).toBe(
      'policy.yml:1: projects: expected a list of projects, not a map of keys',
    );
    expect(failure('retention_days: 1.5\nlimits: { cores: 2.5 }\n').split('\n')).toEqual([
      'policy.yml: 2 problems:',
      '  policy.yml:1: retention_days: expected a whole number of days',
      '  policy.yml:2: limits.cores: expected a whole number, not 2.5',
    ]);
    expect(failure(withLine(16, '      - 101'))).toBe(
      'policy.yml:16: projects[0].vms[0]: expected a VM, not 101',
    );
  });

  it('reports a missing required key at its parent’s line', () => {
    const message = failure(withLine(12, '    # channels removed'));
    expect(message).toMatch(/^policy\.yml:9: projects\[0\]\.channels: /);
  });

  it('reports a duplicate uuid against uuid, on its own line', () => {
    const duplicate = `${GOOD}  - name: shop-test\n    uuid: 0B6F7C1E-3D2A-4C55-9A53-2F1A4E8B9C10\n    channels: [C0OTHER]\n`;
    expect(failure(duplicate)).toBe(
      'policy.yml:18: projects[1].uuid: duplicate project 0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10',
    );
  });

  it('reports type errors and cross-checks in one pass', () => {
    const both = `${withLine(4, 'approval_ttl_hours: soon')}  - name: shop-prod\n    uuid: 1b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10\n    channels: [C0OTHER]\n`;
    const message = failure(both);
    expect(message).toMatch(/^policy\.yml: 2 problems:/);
    expect(message).toContain('policy.yml:4: approval_ttl_hours: ');
    expect(message).toContain('policy.yml:17: projects[1].name: duplicate project shop-prod');
  });

  it('reports duplicates and approvals without approvers on the project’s line', () => {
    const duplicate = `${GOOD}  - name: shop-prod\n    uuid: 1b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10\n    channels: [C0OTHER]\n`;
    expect(failure(duplicate)).toBe('policy.yml:17: projects[1].name: duplicate project shop-prod');
    const noApprovers = withLine(3, 'approvers: []').replace('    approvers: [U0LEAD]\n', '');
    expect(failure(noApprovers)).toMatch(
      /^policy\.yml:9: projects\[0\]\.approvers: approval is required but/,
    );
  });

  it('names the line of a YAML syntax error, and a document that is not a map', () => {
    expect(failure(withLine(3, 'approvers: [U0ADMIN'))).toMatch(/^policy\.yml:\d+: not valid YAML: /);
    expect(failure('approvers: [U1]\napprovers: [U2]\n')).toMatch(
      /^policy\.yml:2: not valid YAML: Map keys must be unique/,
    );
    expect(failure('- a\n- b\n')).toMatch(/^policy\.yml:1: \(top level\): /);
  });

  it('refuses a YAML alias bomb with the file and the line of its first alias', () => {
    const levels = ['a: &a [x, x, x, x, x, x, x, x, x]'];
    for (const [i, name] of ['b', 'c', 'd', 'e', 'f', 'g', 'h'].entries()) {
      const previous = String.fromCharCode(97 + i);
      levels.push(`${name}: &${name} [${Array(9).fill(`*${previous}`).join(', ')}]`);
    }
    expect(failure(`approvers: [U0ADMIN]\n${levels.join('\n')}\n`)).toBe(
      'policy.yml:3: not valid YAML: its aliases (*name) expand to more than 100 copies; write the values out',
    );
    // A few aliases, as people use them to share a list, are read.
    const shared = `approvers: &ops [U0ADMIN, U0LEAD]\nbreak_glass: *ops\n`;
    expect(parsePolicy(shared).break_glass).toEqual(['U0ADMIN', 'U0LEAD']);
  });

  it('keeps every problem on one line, and one problem is one line', () => {
    for (const text of [withLine(3, 'approvers: [U0ADMIN'), withLine(10, '    uuid: x'), 'a: [\n\n\n']) {
      try {
        parsePolicy(text, 'policy.yml');
        throw new Error('the policy was accepted');
      } catch (error) {
        if (!(error instanceof PolicyError)) throw error;
        for (const problem of error.problems) expect(problem.message).not.toContain('\n');
        if (error.total === 1) expect(error.message).not.toContain('\n');
        expect(error.summary).not.toContain('\n');
      }
    }
  });
});

describe('parsePolicy: monthly amounts the rules compare exactly', () => {
  const ruleWith = (bound: string) =>
    `${GOOD.replace('approvers: [U0LEAD]', 'approvers: [U0LEAD, U0LEAD2]')}    approvals:\n      rules:\n        - { when: { monthly_delta_under: ${bound} }, count: 0 }\n`;

  it.each(['0.0000001', '1e21', '-1e21', '1e-7', '0.1234567', '1234567890123456'])(
    'refuses %s at load, as the running bot could not compare it',
    (bound) => {
      expect(failure(ruleWith(bound))).toBe(
        'policy.yml:19: projects[0].approvals.rules[0].when.monthly_delta_under: expected an amount per month such as 100 or -20.5, with at most 15 digits before the point and 6 after',
      );
    },
  );

  it.each([
    ['0.000001', '0.0000005', '0.000001'],
    ['999999999999999', '999999999999998.99', '999999999999999'],
    ['-20.5', '-20.51', '-20.5'],
    ['0', '-0.01', '0.00'],
    ['1e3', '999.99', '1000'],
  ])('reads %s exactly: a delta just under it matches, one at it does not', (bound, under, at) => {
    const rule = approvalsOf(parsePolicy(ruleWith(bound)), parsePolicy(ruleWith(bound)).projects[0]!)
      .rules[0]!;
    expect(ruleMatches(rule, { kind: 'resize_up', changes: ['cores'], monthlyDelta: under })).toBe(true);
    expect(ruleMatches(rule, { kind: 'resize_up', changes: ['cores'], monthlyDelta: at })).toBe(false);
  });
});

describe('loadPolicy', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cloudops-policy-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reads a file and names it in errors', async () => {
    const good = join(dir, 'good.yml');
    await writeFile(good, GOOD);
    expect((await loadPolicy(good)).projects).toHaveLength(1);
    const bad = join(dir, 'bad.yml');
    await writeFile(bad, withLine(10, '    uuid: nope'));
    await expect(loadPolicy(bad)).rejects.toThrow(`${bad}:10: projects[0].uuid: expected a UUID`);
  });

  it('says plainly when the file cannot be read', async () => {
    const missing = join(dir, 'missing.yml');
    await expect(loadPolicy(missing)).rejects.toThrow(
      `${missing}: cannot read the policy file (ENOENT): it does not exist; copy policy.example.yml to it and edit it (docs/policy.md), or set POLICY_FILE to where yours is`,
    );
  });

  it('accepts an empty file as a policy with no projects', async () => {
    const empty = join(dir, 'empty.yml');
    await writeFile(empty, '');
    expect((await loadPolicy(empty)).projects).toEqual([]);
  });
});

/** The approval policy keys of docs/policy.md#approval-policies, on top of GOOD; line numbers below rely on it. */
const APPROVALS = `${GOOD}    approvals:
      count: 1
      rules:
        - { when: { kind: restore }, count: 2 }
        - { when: { monthly_delta_over: 100 }, count: 2 }
        - { when: { change: [wan, private_network] }, count: 2 }
        - { when: { kind: resize_up, monthly_delta_under: 5 }, count: 0 }
      remind_after_hours: 4
      escalate_to: [S0ONCALL]
    freeze:
      - { from: "2026-12-20T00:00", to: "2027-01-04T00:00", tz: Europe/Berlin, reason: year-end }
      - { weekly: { days: [fri], from: "15:00", to: "23:59" }, tz: Europe/Berlin, reason: no Friday changes }
    break_glass: [U0CTO]
`;

/** Replaces one line (1-based) of APPROVALS. */
function approvalsWith(line: number, text: string): string {
  const lines = APPROVALS.split('\n');
  lines[line - 1] = text;
  return lines.join('\n');
}

describe('parsePolicy: approval policies', () => {
  it('reads the documented example: rules with a value or a list, groups among approvers, freeze, break_glass', () => {
    const policy = parsePolicy(APPROVALS.replace('approvers: [U0ADMIN]', 'approvers: [U0ADMIN, S0PLATFORM]'));
    const project = policy.projects[0];
    expect(policy.approvers).toEqual(['U0ADMIN', 'S0PLATFORM']);
    expect(project?.approvals?.rules[0]).toEqual({ when: { kind: ['restore'] }, count: 2 });
    expect(project?.approvals?.rules[2]?.when.change).toEqual(['wan', 'private_network']);
    expect(project?.approvals).toMatchObject({ count: 1, remind_after_hours: 4, escalate_to: ['S0ONCALL'] });
    expect(project?.freeze?.[1]).toEqual({
      weekly: { days: ['fri'], from: '15:00', to: '23:59' },
      tz: 'Europe/Berlin',
      reason: 'no Friday changes',
    });
    expect(project?.break_glass).toEqual(['U0CTO']);
    expect(project && approvalsOf(policy, project).rules).toHaveLength(4);
  });

  it('a project without its own keys takes the top-level ones; its own replace them', () => {
    const top = `approvals: { count: 2, escalate_to: [U0BOSS] }\nfreeze: [{ weekly: { days: [sat, sun], from: "00:00", to: "24:00" } }]\nbreak_glass: [U0CTO]\n${GOOD.replace('approvers: [U0LEAD]', 'approvers: [U0LEAD, U0LEAD2]')}`;
    const policy = parsePolicy(top);
    const project = policy.projects[0]!;
    expect(approvalsOf(policy, project)).toEqual({ count: 2, rules: [], escalate_to: ['U0BOSS'] });
    expect(freezeOf(policy, project)[0]?.tz).toBe('UTC');
    expect(breakGlassOf(policy, project)).toEqual(['U0CTO']);
    const own = parsePolicy(`${top}    approvals: { count: 0 }\n    freeze: []\n    break_glass: [U0LEAD]\n`);
    const p = own.projects[0]!;
    expect(approvalsOf(own, p)).toEqual({ count: 0, rules: [], escalate_to: [] });
    expect(freezeOf(own, p)).toEqual([]);
    expect(breakGlassOf(own, p)).toEqual(['U0LEAD']);
    // Without any approvals key: one approval, as before the second release.
    expect(approvalsOf(parsePolicy(GOOD), parsePolicy(GOOD).projects[0]!)).toEqual({
      count: 1,
      rules: [],
      escalate_to: [],
    });
  });

  it('lists every user group the policy names, once', () => {
    const policy = parsePolicy(
      APPROVALS.replace('approvers: [U0ADMIN]', 'approvers: [U0ADMIN, S0ONCALL, S0PLATFORM]'),
    );
    expect(userGroupsOf(policy)).toEqual(['S0ONCALL', 'S0PLATFORM']);
  });

  it.each([
    [
      18,
      '      count: -1',
      'policy.yml:18: projects[0].approvals.count: expected a whole number of approvals, 0 or more',
    ],
    [
      18,
      '      count: 1.5',
      'policy.yml:18: projects[0].approvals.count: expected a whole number of approvals',
    ],
    [
      20,
      '        - { when: { kind: reboot }, count: 2 }',
      'policy.yml:20: projects[0].approvals.rules[0].when.kind: expected a kind or a list of them: resize_up, resize_down, restore',
    ],
    [
      22,
      '        - { when: { change: [wan, colour] }, count: 2 }',
      'policy.yml:22: projects[0].approvals.rules[2].when.change',
    ],
    [
      21,
      '        - { when: { monthly_delta_over: lots }, count: 2 }',
      'policy.yml:21: projects[0].approvals.rules[1].when.monthly_delta_over: expected an amount per month',
    ],
    [
      21,
      '        - { when: { monthly_delta_abov: 100 }, count: 2 }',
      'policy.yml:21: projects[0].approvals.rules[1].when.monthly_delta_abov: unknown key, did you mean `monthly_delta_over`?',
    ],
    [
      21,
      '        - { when: { monthly_delta_over: 100 } }',
      'policy.yml:21: projects[0].approvals.rules[1].count:',
    ],
    [
      24,
      '      remind_after_hours: 0',
      'policy.yml:24: projects[0].approvals.remind_after_hours: expected a number of hours above 0',
    ],
    [
      25,
      '      escalate_to: [oncall]',
      'policy.yml:25: projects[0].approvals.escalate_to[0]: expected a Slack user id such as U0123ABC or a user group id',
    ],
    [
      27,
      '      - { from: "2026-12-20T00:00", to: "2026-12-19T00:00", tz: Europe/Berlin }',
      'policy.yml:27: projects[0].freeze[0].to: the window must end after it starts',
    ],
    [
      27,
      '      - { from: "2026-12-20T00:00", to: "2026-12-20T00:00", tz: Europe/Berlin }',
      'policy.yml:27: projects[0].freeze[0].to: the window must end after it starts',
    ],
    [
      27,
      '      - { from: "2026-12-20T00:00", to: "2027-01-04T00:00", tz: Europe/Berlim }',
      'policy.yml:27: projects[0].freeze[0].tz: unknown time zone',
    ],
    [
      27,
      '      - { from: "20 Dec", to: "2027-01-04T00:00" }',
      'policy.yml:27: projects[0].freeze[0].from: expected a local date and time such as "2026-12-20T00:00"',
    ],
    [
      27,
      '      - { from: "2026-02-30T00:00", to: "2027-01-04T00:00" }',
      'policy.yml:27: projects[0].freeze[0].from: expected a local date and time',
    ],
    [
      27,
      '      - { to: "2027-01-04T00:00" }',
      'policy.yml:27: projects[0].freeze[0].from: a freeze needs from and to',
    ],
    [
      28,
      '      - { weekly: { days: [friday], from: "15:00", to: "23:59" } }',
      'policy.yml:28: projects[0].freeze[1].weekly.days[0]: expected a day: sun, mon',
    ],
    [
      28,
      '      - { weekly: { days: [fri], from: "3pm", to: "23:59" } }',
      'policy.yml:28: projects[0].freeze[1].weekly.from: expected a time of day such as "15:00"',
    ],
    [
      28,
      '      - { weekly: { days: [fri], from: "15:00", to: "25:00" } }',
      'policy.yml:28: projects[0].freeze[1].weekly.to: expected a time of day',
    ],
    [
      28,
      '      - { weekly: { days: [fri], from: "15:00", to: "15:00" } }',
      'policy.yml:28: projects[0].freeze[1].weekly.to: the window ends when it starts',
    ],
    [
      28,
      '      - { weekly: { days: [fri], from: "15:00", to: "16:00" }, from: "2026-12-20T00:00" }',
      'policy.yml:28: projects[0].freeze[1].weekly: a window is either dates',
    ],
    [29, '    break_glass: [cto]', 'policy.yml:29: projects[0].break_glass[0]: expected a Slack user id'],
  ])('names file:line:field for a bad approval key on line %d', (line, text, expected) => {
    expect(failure(approvalsWith(line, text))).toContain(expected);
  });

  it('refuses a count above the listed users when no group is listed, on the count’s line', () => {
    const noGroup = approvalsWith(25, '      escalate_to: []');
    expect(failure(noGroup)).toBe(
      'policy.yml:20: projects[0].approvals.rules[0].count: 2 approvals can never be reached: only 1 approver(s) are listed and no user group',
    );
    // A group among the approvers may hold anyone: the count is checked when a request is made.
    expect(
      parsePolicy(noGroup.replace('approvers: [U0LEAD]', 'approvers: [U0LEAD, S0OPS]')).projects,
    ).toHaveLength(1);
    // Two listed users reach a count of two.
    expect(
      parsePolicy(noGroup.replace('approvers: [U0LEAD]', 'approvers: [U0LEAD, U0LEAD2]')).projects,
    ).toHaveLength(1);
    // A top-level default is checked for each project that takes it.
    const top = `approvals: { count: 3 }\n${GOOD}`;
    expect(failure(top)).toBe(
      'policy.yml:1: approvals.count: 3 approvals can never be reached: only 1 approver(s) are listed and no user group (for project 0)',
    );
  });
});

describe('parsePolicy: change_ticket', () => {
  it('reads it at the top and per project, `for` defaulting to all three kinds and `required` to true', () => {
    const policy = parsePolicy(
      `change_ticket: { system: servicenow, states: [Scheduled, Implement] }\n${GOOD}    change_ticket: { system: jira, for: [resize_up], states: [Approved], projects: [OPS] }\n`,
    );
    expect(policy.change_ticket).toEqual({
      system: 'servicenow',
      required: true,
      for: ['resize_up', 'resize_down', 'restore'],
      states: ['Scheduled', 'Implement'],
    });
    const project = findProject(policy, 'shop-prod');
    expect(project && changeTicketOf(policy, project)).toEqual({
      system: 'jira',
      required: true,
      for: ['resize_up'],
      states: ['Approved'],
      projects: ['OPS'],
    });
  });

  it('names the line and field of each problem', () => {
    const message = failure(
      `change_ticket: { system: remedy, states: [] }\n${GOOD}    change_ticket:\n      system: servicenow\n      states: [Implement]\n      for: [resize_sideways]\n`,
    );
    expect(message).toContain(
      'policy.yml:1: change_ticket.system: expected a ticket system: jira, servicenow',
    );
    expect(message).toContain('policy.yml:1: change_ticket.states: expected at least one state name');
    expect(message).toMatch(/policy\.yml:21: projects\[0\]\.change_ticket\.for\[0\]: expected a kind/);
    const jiraOnly = failure(
      `${GOOD}    change_ticket: { system: servicenow, states: [Implement], projects: [OPS] }\n`,
    );
    expect(jiraOnly).toBe(
      'policy.yml:17: projects[0].change_ticket.projects: projects names Jira project keys; it is for system: jira only',
    );
  });
});
