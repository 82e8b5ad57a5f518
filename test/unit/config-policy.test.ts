import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approversOf, findProject, loadPolicy, PolicyError, parsePolicy } from '../../src/config/policy.ts';

/** The example of PRODUCT.md §2, with line numbers the tests below rely on. */
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

  it('names an unknown key itself, on its own line (fixed: it used to say "(top level)" at line 1)', () => {
    expect(failure(`${GOOD}colour: blue\n`)).toBe('policy.yml:17: colour: Unrecognized key: "colour"');
    expect(failure(withLine(11, '    clutser: zone-1'))).toMatch(
      /^policy\.yml:11: projects\[0\]\.clutser: Unrecognized key/,
    );
  });

  it('reports a missing required key at its parent’s line', () => {
    const message = failure(withLine(12, '    # channels removed'));
    expect(message).toMatch(/^policy\.yml:9: projects\[0\]\.channels: /);
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

  it('keeps every message on one line', () => {
    for (const text of [withLine(3, 'approvers: [U0ADMIN'), withLine(10, '    uuid: x'), 'a: [\n\n\n']) {
      expect(failure(text)).not.toContain('\n');
    }
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
    await expect(loadPolicy(missing)).rejects.toThrow(`${missing}: cannot read the policy file (ENOENT)`);
  });

  it('accepts an empty file as a policy with no projects', async () => {
    const empty = join(dir, 'empty.yml');
    await writeFile(empty, '');
    expect((await loadPolicy(empty)).projects).toEqual([]);
  });
});
