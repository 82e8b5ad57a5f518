import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { parsePolicy } from '../../src/config/policy.ts';

const text = readFileSync(fileURLToPath(new URL('../../policy.example.yml', import.meta.url)), 'utf8');

type Raw = Record<string, unknown> & {
  projects: (Record<string, unknown> & { vms?: Record<string, unknown>[] })[];
};

describe('policy.example.yml', () => {
  it('parses with the bot’s own policy parser', () => {
    const policy = parsePolicy(text, 'policy.example.yml');
    expect(policy.projects.map((p) => p.name)).toEqual(['shop-prod', 'shop-staging']);
    expect(policy.resize_fields.cpu_class).toEqual({ field: 'cpu_type', values: ['regular', 'light'] });
    expect(policy.projects[1]?.approval).toEqual({
      resize_up: 'none',
      resize_down: 'none',
      restore: 'required',
    });
  });

  it('shows every key the parser knows, at every level', () => {
    const raw = parse(text) as Raw;
    const policy = parsePolicy(text, 'policy.example.yml');
    // Keys with defaults appear in the parsed policy: each must be written out in the example too.
    expect(Object.keys(raw).sort()).toEqual(Object.keys(policy).sort());
    expect(Object.keys(raw).sort()).toEqual(
      [
        'agents',
        'approval_ttl_hours',
        'approval_valid_hours',
        'approvals',
        'approvers',
        'audit_retention_days',
        'break_glass',
        'freeze',
        'currency',
        'limits',
        'projects',
        'reference_vm',
        'resize_fields',
        'retention_days',
        'requests_per_hour',
        'workspace',
      ].sort(),
    );
    expect(Object.keys(raw.limits as object).sort()).toEqual(Object.keys(policy.limits).sort());
    expect(Object.keys(raw.reference_vm as object).sort()).toEqual(Object.keys(policy.reference_vm).sort());
    expect(Object.keys(raw.resize_fields as object).sort()).toEqual(['cpu_class', 'private_network']);
    const projectKeys = new Set(raw.projects.flatMap((p) => Object.keys(p)));
    for (const key of [
      'name',
      'uuid',
      'cluster',
      'channels',
      'approvers',
      'approval',
      'approvals',
      'freeze',
      'break_glass',
      'approval_valid_hours',
      'requesters',
      'vms',
    ])
      expect(projectKeys).toContain(key);
    const vmKeys = new Set(raw.projects.flatMap((p) => p.vms ?? []).flatMap((vm) => Object.keys(vm)));
    for (const key of [
      'vmid',
      'name',
      'ha',
      'cores',
      'ram_gb',
      'os_disk_gb',
      'cpu_class',
      'wan_mode',
      'private_network',
      'created_at',
    ]) {
      expect(vmKeys).toContain(key);
    }
  });
});
