import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CloudSim, startCloudSim } from '../../sim/cloud/server.ts';
import { startSlackStandIn } from '../../sim/slack/server.ts';
import { RequestStore } from '../../src/requests/store/store.ts';
import { resizeRequest } from '../fixtures/requests.ts';
import { deleteKeys, testRedis, testRedisUrl, uniquePrefix } from '../helpers/redis.ts';
import { runProcess } from '../helpers/run-process.ts';

const repo = fileURLToPath(new URL('../../', import.meta.url));
// The shipped binary: it runs dist/ (built by the global setup, as `npm start` builds it), as in the image.
const BIN = join(repo, 'bin', 'cloudops.mjs');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the real `cloudops` binary in a child process with only the environment given (plus PATH/HOME). */
function cloudops(args: string[], env: Record<string, string>): Promise<Run> {
  return runProcess(process.execPath, [BIN, ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
  });
}

/** Exactly one line on stderr, and nothing that looks like a stack trace. */
function oneLine(run: Run): string {
  expect(run.stderr.endsWith('\n')).toBe(true);
  const lines = run.stderr.trimEnd().split('\n');
  expect(lines).toHaveLength(1);
  expect(run.stderr).not.toMatch(/\n\s+at /);
  return lines[0] ?? '';
}

const API_KEY = 'cli-test-key-7f3a9c';
const UUID = '0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10';

let sim: CloudSim;
let dir: string;
let policyFile: string;
let env: Record<string, string>;

function policyText(createdAt: string): string {
  return `approvers: [U0ADMIN]
currency: CHF
resize_fields:
  cpu_class: { field: cpu_type, values: [regular, light] }
projects:
  - name: shop-prod
    uuid: ${UUID}
    cluster: zone-1
    channels: [C0PROD]
    vms:
      - { vmid: 101, name: web-1, ha: true, cores: 2, ram_gb: 4, os_disk_gb: 50, cpu_class: regular, wan_mode: ipv4, created_at: "${createdAt}" }
      - { vmid: 102, cores: 4, ram_gb: 8, os_disk_gb: 100, wan_mode: ipv4 }
`;
}

beforeAll(async () => {
  sim = await startCloudSim({ apiKey: API_KEY });
  dir = await mkdtemp(join(tmpdir(), 'cloudops-cli-'));
  policyFile = join(dir, 'policy.yml');
  await writeFile(policyFile, policyText('2025-03-01T10:00:00Z'));
  env = { CLOUD_API_URL: sim.url, CLOUD_API_KEY: API_KEY, POLICY_FILE: policyFile };
});

afterAll(async () => {
  await sim?.close();
  await rm(dir, { recursive: true, force: true });
});

// Runs alone: it changes a price in the sim that other tests' cost previews read.
describe('cloudops clusters', () => {
  it('lists active clusters with the reference VM cost, cheapest marked, live from the API', async () => {
    const run = await cloudops(['clusters', '--json'], env);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const out = JSON.parse(run.stdout) as {
      currency: string;
      clusters: {
        name: string;
        prices: Record<string, string>;
        reference: { hourly: string; monthly: string; cheapest: boolean };
      }[];
    };
    expect(out.currency).toBe('CHF');
    const names = out.clusters.map((c) => c.name);
    expect(names).toEqual(expect.arrayContaining(['zone-1', 'zone-2', 'zone-3']));
    expect(names).not.toContain('zone-9');
    const zone1 = out.clusters.find((c) => c.name === 'zone-1');
    // Default reference VM: 2 × 0.0120 + 4 × 0.0040 + 50 × 0.00015 + 1 × 0.0050 = 0.0525/h; × 730 = 38.325.
    expect(zone1?.reference).toMatchObject({ hourly: '0.0525', monthly: '38.33' });
    expect(out.clusters.filter((c) => c.reference.cheapest).map((c) => c.name)).toEqual(['zone-3']);

    sim.setPrice('zone-1', 'vcore_regular', '0.0010');
    const after = await cloudops(['clusters'], env);
    expect(after.code).toBe(0);
    // 2 × 0.0010 + 0.016 + 0.0075 + 0.005 = 0.0305/h; zone-1 is now the cheapest.
    expect(after.stdout).toMatch(/^zone-1\s+Frankfurt\s+0\.0010 .*0\.0305\s+22\.27\s+cheapest$/m);
    expect(after.stdout).toContain('Hourly prices (CHF)');
    sim.setPrice('zone-1', 'vcore_regular', '0.0120');
    // The list endpoint needs no key, and was called without one.
    const lists = sim.calls.filter((c) => c.route === 'list');
    expect(lists.length).toBeGreaterThanOrEqual(2);
    expect(lists.every((c) => c.headers.authorization === undefined)).toBe(true);
  });
});

describe.concurrent('cloudops cluster', () => {
  it('shows one cluster in Shape A with its status, or Shape B when asked, with the bearer key', async () => {
    const a = await cloudops(['cluster', 'zone-1', '--json'], env);
    expect(a.code).toBe(0);
    expect(JSON.parse(a.stdout)).toMatchObject({ name: 'zone-1', shape: 'A', status: 'active' });
    const b = await cloudops(['cluster', 'zone-2', '--shape', 'B', '--json'], env);
    expect(b.code).toBe(0);
    const parsed = JSON.parse(b.stdout) as Record<string, unknown>;
    expect(parsed).toMatchObject({ name: 'zone-2', shape: 'B' });
    expect(parsed).not.toHaveProperty('status');
    const gets = sim.calls.filter((c) => (c.route === 'getA' || c.route === 'getB') && c.status === 200);
    expect(gets.length).toBeGreaterThanOrEqual(2);
    expect(gets.every((c) => c.headers.authorization === `Bearer ${API_KEY}`)).toBe(true);
  });

  it('fails with one line and exit 1 for an unknown cluster or a wrong key, never echoing the key', async () => {
    const missing = await cloudops(['cluster', 'zone-404'], env);
    expect(missing.code).toBe(1);
    expect(oneLine(missing)).toMatch(/^cloudops: getCluster: /);
    const wrongKey = await cloudops(['cluster', 'zone-1'], { ...env, CLOUD_API_KEY: 'wrong-secret-key-123' });
    expect(wrongKey.code).toBe(1);
    const line = oneLine(wrongKey);
    expect(line).toMatch(/^cloudops: getCluster: /);
    expect(`${wrongKey.stdout}${wrongKey.stderr}`).not.toContain('wrong-secret-key-123');
  });
});

describe.concurrent('cloudops policy check', () => {
  it('accepts a good file and names file:line:field of a bad one', async () => {
    const good = await cloudops(['policy', 'check', '--json'], env);
    expect(good.code).toBe(0);
    expect(JSON.parse(good.stdout)).toMatchObject({
      ok: true,
      file: policyFile,
      projects: [{ name: 'shop-prod', vms: 2 }],
    });
    const badFile = join(dir, 'bad.yml');
    await writeFile(
      badFile,
      policyText('2025-03-01T10:00:00Z').replace('channels: [C0PROD]', 'channels: [general]'),
    );
    const bad = await cloudops(['policy', 'check', badFile], env);
    expect(bad.code).toBe(1);
    expect(oneLine(bad)).toBe(
      `cloudops: ${badFile}:9: projects[0].channels[0]: expected a Slack channel id such as C0123ABC`,
    );
  });
});

describe.concurrent('cloudops policy check and plan: verified approvals', () => {
  const verified = () =>
    policyText('2025-03-01T10:00:00Z')
      .replace('approvers: [U0ADMIN]', 'approvers: [U0ADMIN, U0LEAD]')
      .replace(
        '    channels: [C0PROD]\n',
        '    channels: [C0PROD]\n    approvals:\n      count: 1\n      verify: passkey\n      rules:\n        - { when: { monthly_delta_over: 10 }, count: 2, verify: [passkey, sso] }\n',
      );

  it('policy check shows which approvals are verified, and warns of a method the environment cannot serve', async () => {
    const file = join(dir, 'verified.yml');
    await writeFile(file, verified());
    const run = await cloudops(['policy', 'check', file], env);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(
      "approvers U0ADMIN, U0LEAD; requesters not set: anyone in the project's channels may ask; verified approvals: passkey by default, passkey or SSO for rule 1 (monthly cost difference over 10 CHF)\n",
    );
    expect(run.stdout).toContain(
      '  warning: projects[0].approvals.verify: passkey needs PUBLIC_URL (the passkey page), which is not set;',
    );
    const json = await cloudops(['policy', 'check', file, '--json'], {
      ...env,
      PUBLIC_URL: 'https://cloudops.example.com',
    });
    const summary = JSON.parse(json.stdout) as { projects: { verify: unknown }[]; warnings: string[] };
    expect(summary.projects[0]?.verify).toEqual({
      default: ['passkey'],
      rules: [{ rule: 'rule 1 (monthly cost difference over 10 CHF)', verify: ['passkey', 'sso'] }],
    });
    expect(summary.warnings).toEqual([
      'projects[0].approvals.rules[0].verify: sso needs OIDC_ISSUER, OIDC_CLIENT_ID and OIDC_CLIENT_SECRET (the SSO login), which are not set; set them or remove the verify (docs/policy.md#verified-approvals)',
    ]);
  });

  it('plan names the approvals a resize needs and whether they are verified', async () => {
    const file = join(dir, 'verified-plan.yml');
    await writeFile(file, verified());
    const planEnv = { ...env, POLICY_FILE: file };
    // +2 cores cost 17.52 a month more: rule 1; 2 GB more RAM on VM 102 costs less than 10: the default.
    const up = await cloudops(['plan', 'resize', 'shop-prod', '101', 'cores=4'], planEnv);
    expect(up.code).toBe(0);
    expect(up.stdout).toContain(
      'Approval: 2 approvals (rule 1 (monthly cost difference over 10 CHF)), each verified by passkey or SSO.\n',
    );
    const json = await cloudops(['plan', 'resize', 'shop-prod', '102', 'cores=6', '--json'], planEnv);
    expect(JSON.parse(json.stdout)).toMatchObject({
      allowed: true,
      approval: { count: 2, verify: ['passkey', 'sso'] },
    });
    const small = await cloudops(['plan', 'resize', 'shop-prod', '102', 'ram=10', '--json'], planEnv);
    expect(JSON.parse(small.stdout)).toMatchObject({
      approval: { count: 1, rule: 'the default', verify: ['passkey'] },
    });
  });

  it('plan of a resize that raises and lowers meets the raise’s verify, as the bot plans it', async () => {
    const file = join(dir, 'verified-mixed.yml');
    await writeFile(
      file,
      policyText('2025-03-01T10:00:00Z')
        .replace('approvers: [U0ADMIN]', 'approvers: [U0ADMIN, U0LEAD]')
        .replace(
          '    channels: [C0PROD]\n',
          '    channels: [C0PROD]\n    approvals:\n      count: 1\n      rules:\n        - { when: { kind: resize_up }, count: 1, verify: passkey }\n',
        ),
    );
    const planEnv = { ...env, POLICY_FILE: file };
    // VM 102: 4 cores and 8 GB; 6 cores with 6 GB raises one and lowers the other.
    const mixed = await cloudops(
      ['plan', 'resize', 'shop-prod', '102', 'cores=6', 'ram=6', '--stopped', '--json'],
      planEnv,
    );
    expect(JSON.parse(mixed.stdout)).toMatchObject({ approval: { count: 1, verify: ['passkey'] } });
    const down = await cloudops(
      ['plan', 'resize', 'shop-prod', '102', 'ram=6', '--stopped', '--json'],
      planEnv,
    );
    expect(
      (JSON.parse(down.stdout) as { approval: { verify?: unknown } }).approval.verify ?? null,
    ).toBeNull();
  });
});

describe('cloudops policy check: user groups', () => {
  it('warns about each user group Slack will not resolve (it grants nobody), and says when none could be asked', async () => {
    const slack = await startSlackStandIn({ botToken: 'xoxb-cli-groups-test' });
    try {
      slack.setUserGroup('S0OPS', ['U0OPS1']);
      slack.setUserGroup('S0PAID', { error: 'plan_upgrade_required' });
      const file = join(dir, 'groups.yml');
      await writeFile(
        file,
        policyText('2025-03-01T10:00:00Z').replace(
          'approvers: [U0ADMIN]',
          'approvers: [U0ADMIN, S0OPS, S0PAID]\nbreak_glass: [S0GONE]',
        ),
      );
      const run = await cloudops(['policy', 'check', file], {
        ...env,
        SLACK_BOT_TOKEN: 'xoxb-cli-groups-test',
        SLACK_API_URL: slack.apiUrl,
      });
      expect(run.code).toBe(0);
      expect(run.stdout).toContain(
        '  warning: user group S0PAID cannot be resolved by Slack (plan_upgrade_required): it grants nobody\n',
      );
      expect(run.stdout).toContain(
        '  warning: user group S0GONE cannot be resolved by Slack (no_such_subteam): it grants nobody\n',
      );
      expect(run.stdout).not.toContain('S0OPS cannot');
      expect(
        slack
          .callsOf('usergroups.users.list')
          .map((c) => c.args.usergroup)
          .sort(),
      ).toEqual(['S0GONE', 'S0OPS', 'S0PAID']);
      expect(slack.problems).toEqual([]);
      const noToken = await cloudops(['policy', 'check', file], env);
      expect(noToken.stdout).toContain(
        '  warning: user groups S0OPS, S0PAID, S0GONE not checked: set SLACK_BOT_TOKEN to ask Slack who is in them',
      );
    } finally {
      await slack.close();
    }
  });
});

describe.concurrent('cloudops plan resize', () => {
  it('plans an allowed resize with the API bodies and the cost difference, and sends nothing', async () => {
    const before = sim.calls.length;
    const run = await cloudops(
      ['plan', 'resize', 'shop-prod', '101', 'cores=4', 'wan=dual', 'cpu=regular', '--two-step', '--json'],
      env,
    );
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const plan = JSON.parse(run.stdout) as Record<string, unknown>;
    expect(plan).toMatchObject({
      allowed: true,
      steps: [{ cores: 4, wanMode: 'off' }, { wanMode: 'dual' }],
      bodies: [{ cores: 4, wan_mode: 'off' }, { wan_mode: 'dual' }],
      increases: ['cores'],
      // ipv4 → dual adds a network: a raise, like the cores.
      changes: { cores: 'raise', wanMode: 'raise' },
      approvalKind: 'resize_up',
      // +2 cores × 0.0120 = +0.0240/h; dual keeps the one public IPv4 address.
      cost: {
        cluster: 'zone-1',
        currency: 'CHF',
        hourly: '0.0765',
        diffHourly: '0.0240',
        diffMonthly: '17.52',
        diffPercent: '45.7',
      },
    });
    const calls = sim.calls.slice(before);
    expect(calls.some((c) => c.route === 'list')).toBe(true);
    expect(calls.filter((c) => c.method !== 'GET')).toEqual([]);
    expect(sim.applied).toEqual([]);
  });

  it('exits 3 with the reasons when the rules refuse, and names the time of a 24-hour wait', async () => {
    const refused = await cloudops(
      ['plan', 'resize', 'shop-prod', '101', 'cores=1', 'disk=40', '--at', '2025-03-01T20:00:00Z'],
      env,
    );
    expect(refused.code).toBe(3);
    expect(refused.stdout).toContain('Refused by the rules:');
    expect(refused.stdout).toContain('the minimum allowed is 50 GB');
    expect(refused.stdout).toContain('Cores can be lowered from 2025-03-02 10:00 UTC');
    expect(refused.stdout).toContain('--stopped confirms the VM is stopped');

    const wait = await cloudops(
      [
        'plan',
        'resize',
        'shop-prod',
        '101',
        'cores=1',
        '--stopped',
        '--at',
        '2025-03-01T20:00:00Z',
        '--json',
      ],
      env,
    );
    expect(wait.code).toBe(3);
    expect(JSON.parse(wait.stdout)).toMatchObject({
      allowed: false,
      cooldownOnly: true,
      earliestAllowedAt: '2025-03-02T10:00:00.000Z',
      violations: [{ field: 'cores', code: 'cooldown' }],
    });
    expect(sim.applied).toEqual([]);
  });

  it('refuses a malformed value or unknown project with one line (exit 2 / 1)', async () => {
    const badValue = await cloudops(['plan', 'resize', 'shop-prod', '101', 'ram=lots'], env);
    expect(badValue.code).toBe(2);
    expect(oneLine(badValue)).toBe('cloudops: ram: RAM (GB) takes a whole number from 1 to 512, not "lots".');
    const unknown = await cloudops(['plan', 'resize', 'shop-dev', '101', 'cores=2'], env);
    expect(unknown.code).toBe(1);
    expect(oneLine(unknown)).toMatch(/^cloudops: unknown project "shop-dev" \(projects in .*: shop-prod\)$/);
  });
});

describe.concurrent('cloudops audit', () => {
  let redis: Redis;
  let prefix: string;

  beforeAll(() => {
    redis = testRedis();
    prefix = uniquePrefix('cli-audit');
  });
  afterAll(async () => {
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('shows every decision of an approval policy: the rule, each approval, reminder, escalation, freeze, break glass', async () => {
    // A prefix of its own: the other audit tests of this block count every entry after their time.
    const own = uniquePrefix('cli-audit-policy');
    const clock = new Date('2025-04-01T08:00:00Z');
    const store = new RequestStore(redis, { prefix: own, now: () => clock });
    const created = await store.create(
      resizeRequest({ requiredApprovals: 2, approvals: [], approvers: ['U0LEAD', 'S0OPS'] }),
      'U0DEV',
      'rule 1 (more cores): 2 approvals',
    );
    await store.approve(created.id, 'U0LEAD');
    await store.note(created.id, { note: 'reminder', actor: 'cloudops' }, () => ({
      remindedAt: clock.toISOString(),
    }));
    await store.note(created.id, { note: 'escalation', actor: 'cloudops' }, () => ({
      escalatedAt: clock.toISOString(),
    }));
    await store.approve(created.id, 'U0OPS1');
    await store.transition(created.id, {
      from: ['approved'],
      to: 'frozen',
      actor: 'cloudops',
      detail: 'held by a freeze (year-end) until 2025-04-02T00:00:00.000Z',
    });
    await store.transition(created.id, {
      from: ['frozen'],
      to: 'queued',
      actor: 'U0CTO',
      detail: 'break glass: outage',
    });
    const run = await cloudops(['audit', '--since', '2025-04-01T00:00:00Z'], {
      ...env,
      REDIS_URL: testRedisUrl(),
      REDIS_PREFIX: own,
    });
    await deleteKeys(redis, own);
    expect(run.code).toBe(0);
    const lines = run.stdout
      .trimEnd()
      .split('\n')
      .filter((line) => line.includes(created.id))
      .map((line) =>
        line
          .split(/\s{2,}/)
          .slice(2)
          .join(' | '),
      );
    expect(lines).toEqual([
      'created | U0DEV | rule 1 (more cores): 2 approvals',
      'pending | U0DEV',
      'approval | U0LEAD | approval 1 of 2',
      'reminder | cloudops',
      'escalation | cloudops',
      'approved | U0OPS1 | approval 2 of 2',
      'frozen | cloudops | held by a freeze (year-end) until 2025-04-02T00:00:00.000Z',
      'queued | U0CTO | break glass: outage',
    ]);
  });

  it('exports the audit log since a time as JSON lines', async () => {
    let clock = new Date('2025-03-01T08:00:00Z');
    const store = new RequestStore(redis, { prefix, now: () => clock });
    const old = await store.create(resizeRequest(), 'U0OLD');
    clock = new Date('2025-03-01T12:00:00Z');
    const fresh = await store.create(resizeRequest(), 'U0DEV');
    clock = new Date('2025-03-01T12:05:00Z');
    await store.transition(fresh.id, { from: ['pending'], to: 'approved', actor: 'U0LEAD' });

    const auditEnv = { ...env, REDIS_URL: testRedisUrl(), REDIS_PREFIX: prefix };
    const run = await cloudops(['audit', '--since', '2025-03-01T10:00:00Z', '--json'], auditEnv);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const entries = run.stdout
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as { request_id: string; act: string; actor: string; prev: string });
    expect(entries.map((e) => [e.request_id, e.act, e.actor])).toEqual([
      [fresh.id, 'created', 'U0DEV'],
      [fresh.id, 'pending', 'U0DEV'],
      [fresh.id, 'approved', 'U0LEAD'],
    ]);
    expect(entries.every((e) => Object.hasOwn(e, 'prev') && Object.hasOwn(e, 'hash'))).toBe(true);
    expect(entries.some((e) => e.request_id === old.id)).toBe(false);

    const human = await cloudops(['audit', '--since', '2025-03-01T00:00:00Z'], auditEnv);
    expect(human.code).toBe(0);
    // Since midnight: both requests (created and pending each) and the approval, one line per entry.
    const lines = human.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(5);
    expect(lines[0]).toMatch(new RegExp(`^2025-03-01T08:00:00.000Z  ${old.id}  created\\s+U0OLD$`));
  });

  it('prints a typed detail with a line break, a terminal escape or a bidi override quoted and escaped, one line per entry', async () => {
    const own = uniquePrefix('cli-audit-typed');
    const clock = new Date('2025-05-01T08:00:00Z');
    const store = new RequestStore(redis, { prefix: own, now: () => clock });
    const created = await store.create(resizeRequest(), 'U0DEV', 'rule: one approver');
    const forged = `not now\n${clock.toISOString()}  ${created.id}  approved         U0LEAD  approval 1 of 1`;
    const typed = `${forged} \u001b[2J\u001b]0;owned\u0007 \u202Eevil\u200B "quoted"`;
    await store.transition(created.id, { from: ['pending'], to: 'rejected', actor: 'U0LEAD', detail: typed });
    const run = await cloudops(['audit', '--since', '2025-05-01T00:00:00Z'], {
      ...env,
      REDIS_URL: testRedisUrl(),
      REDIS_PREFIX: own,
    });
    await deleteKeys(redis, own);
    expect(run.code).toBe(0);
    const lines = run.stdout.trimEnd().split('\n');
    // created, pending, rejected: no fourth line forged by the detail.
    expect(lines).toHaveLength(3);
    expect(lines.map((line) => line.split(/\s{2,}/)[2])).toEqual(['created', 'pending', 'rejected']);
    expect(run.stdout).not.toMatch(/(?!\n)[\p{Cc}\p{Cf}]/u);
    expect(lines[0]).toMatch(/ {2}rule: one approver$/);
    const rejected = lines[2] ?? '';
    const shown = rejected.slice(rejected.indexOf('  U0LEAD  ') + '  U0LEAD  '.length);
    expect(JSON.parse(shown)).toBe(typed);
  });

  it('says in one line when Redis cannot be reached, without the password, and refuses a bad --since', async () => {
    const down = await cloudops(['audit', '--since', '24h'], {
      ...env,
      REDIS_URL: 'redis://:pa55word@127.0.0.1:1',
    });
    expect(down.code).toBe(1);
    expect(oneLine(down)).toBe('cloudops: REDIS_URL: cannot reach redis://127.0.0.1:1 (ECONNREFUSED)');
    const bad = await cloudops(['audit', '--since', 'yesterday'], env);
    expect(bad.code).toBe(2);
    expect(oneLine(bad)).toMatch(/^cloudops: --since: expected an ISO date/);
  });
});

describe.concurrent('cloudops usage and environment', () => {
  it('refuses unknown commands and flags, and a bad environment value without echoing it', async () => {
    const unknown = await cloudops(['frobnicate'], env);
    expect(unknown.code).toBe(2);
    expect(oneLine(unknown)).toBe('cloudops: unknown command "frobnicate" (see cloudops help)');
    const badEnv = await cloudops(['clusters'], { ...env, CLOUD_API_URL: 'ftp://secret-host.example' });
    expect(badEnv.code).toBe(1);
    expect(oneLine(badEnv)).toBe(
      'cloudops: CLOUD_API_URL: expected the API base URL, e.g. https://api.example.com',
    );
    expect(badEnv.stderr).not.toContain('secret-host');
    const help = await cloudops(['help'], env);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('plan resize <project> <vmid>');
  });

  it('--version prints the package version, with no configuration at all', async () => {
    const { version } = JSON.parse(await readFile(join(repo, 'package.json'), 'utf8')) as { version: string };
    for (const flag of ['--version', '-v']) {
      const run = await cloudops([flag], {});
      expect(run.code, flag).toBe(0);
      expect(run.stdout).toBe(`cloudops ${version}\n`);
      expect(run.stderr).toBe('');
    }
  });
});
