/** The tests' policy fixtures: the workspace, its people, channels and projects, and the default policy. */

/** The team id of the test workspace; the default policy's `workspace`. */
export const TEAM = 'T0TEST';

/** People of the default policy: requesters, the project's approvers, the default approver. */
export const USERS = {
  dev: 'U0DEV',
  dev2: 'U0DEV2',
  lead: 'U0LEAD',
  lead2: 'U0LEAD2',
  admin: 'U0ADMIN',
} as const;
/** Channels of the default policy. */
export const CHANNELS = { prod: 'C0PROD', staging: 'C0STAGE', random: 'C0RANDOM' } as const;
export const PROD_UUID = '0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10';
export const STAGING_UUID = 'a3c1e2d4-5b6f-4a7b-8c9d-0e1f2a3b4c5d';

/**
 * The top of the tests' policies: the workspace, its currency, the admin as approver everywhere, approvals that wait
 * a day, and the limits; a person's hourly requests are not what these tests are about (test/e2e/slack-requesters
 * is), and some make dozens as one person. A test's policy adds its projects below it.
 */
export const POLICY_HEAD = `workspace: ${TEAM}
currency: EUR
approvers: [${USERS.admin}]
approval_ttl_hours: 24
requests_per_hour: 10000
limits: { cores: 32, ram_gb: 256, os_disk_gb: 2000 }`;

/** The two VMs of shop-prod as the cloud simulator seeds them, as lines of a project's `vms:`. */
export const PROD_VMS = `      - { vmid: 101, name: web-1, ha: true, cores: 2, ram_gb: 4, os_disk_gb: 50, cpu_class: regular, wan_mode: ipv4 }
      - { vmid: 102, name: db-1, cores: 4, ram_gb: 8, os_disk_gb: 100, cpu_class: regular, wan_mode: ipv4 }`;

/**
 * The default test policy. Its VM facts match the cloud sim's default seed; VM 103 was created two hours before
 * `start`, so lowering it is refused by the 24-hour rule.
 */
export function defaultPolicyYaml(start: Date): string {
  const twoHoursAgo = new Date(start.getTime() - 2 * 3_600_000).toISOString();
  return `
${POLICY_HEAD}
resize_fields:
  cpu_class: { field: cpu_type, values: [regular, light] }
  private_network: { field: private_network, values: ['off', 'on'] }
projects:
  - name: shop-prod
    uuid: ${PROD_UUID}
    cluster: zone-1
    channels: [${CHANNELS.prod}]
    approvers: [${USERS.lead}, ${USERS.lead2}]
    vms:
${PROD_VMS}
      - { vmid: 103, name: worker-new, cores: 4, ram_gb: 8, os_disk_gb: 40, cpu_class: regular, wan_mode: 'off', created_at: '${twoHoursAgo}' }
      - { vmid: 104, name: edge-1, cores: 2, ram_gb: 2, os_disk_gb: 20, cpu_class: light, wan_mode: dual, private_network: 'on' }
  - name: shop-staging
    uuid: ${STAGING_UUID}
    cluster: zone-2
    channels: [${CHANNELS.staging}]
    approval: { resize_up: none, resize_down: none, restore: none }
    vms:
      - { vmid: 201, name: staging-1, cores: 1, ram_gb: 2, os_disk_gb: 20, cpu_class: light, wan_mode: ipv6 }
`;
}
