import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { policyVersionOf } from '../../src/config/policy.ts';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { requestKeys } from '../../src/requests/store/keys.ts';
import { OPS, type OpsBot, startOpsBot } from '../helpers/ops-bot.ts';
import { testRedis, testRedisUrl } from '../helpers/redis.ts';
import { click, type FlowBot, reject, submitRequest } from '../helpers/request-flow.ts';
import { runProcess } from '../helpers/run-process.ts';
import { TEST_SEAL_KEY } from '../helpers/seal.ts';

// `cloudops report` over requests made through the real flow (signed slash commands, the modal, the approver's
// click, the run against the cloud sim) across three weeks and two projects: the CSV and the HTML hold exactly them.
const repo = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(repo, 'bin', 'cloudops.mjs');
const STAGE = 'C0STAGE';
const POLICY = `
workspace: ${OPS.team}
currency: EUR
approvers: [${OPS.lead}]
projects:
  - name: shop-prod
    uuid: 0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10
    cluster: zone-1
    channels: [${OPS.channel}]
    vms:
      - { vmid: 101, name: web-1, ha: true, cores: 2, ram_gb: 4, os_disk_gb: 50, wan_mode: ipv4 }
      - { vmid: 102, name: db-1, cores: 4, ram_gb: 8, os_disk_gb: 100, wan_mode: ipv4 }
  - name: shop-staging
    uuid: a3c1e2d4-5b6f-4a7b-8c9d-0e1f2a3b4c5d
    cluster: zone-1
    channels: [${STAGE}]
    vms:
      - { vmid: 201, name: staging-1, cores: 1, ram_gb: 2, os_disk_gb: 20, wan_mode: ipv6 }
`;
const DAY = 86_400_000;

let clock = new Date('2026-11-17T09:30:00Z');
let ops: OpsBot;
let redis: Redis;
let dir: string;
const ids: Record<string, string> = {};

const flow = (channel: string = OPS.channel): FlowBot => ({
  url: ops.url,
  signingSecret: ops.secrets.signingSecret,
  slack: ops.slack,
  team: OPS.team,
  channel,
});

const stored = async (id: string) =>
  JSON.parse((await redis.get(requestKeys(ops.prefix).request(id))) as string) as CloudRequest;

async function until(check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function approved(channel: string, text: string): Promise<string> {
  const posted = await submitRequest(flow(channel), OPS.dev, text);
  await click(flow(channel), OPS.lead, posted, 'approve');
  await until(async () => (await stored(posted.requestId)).state === 'succeeded');
  return posted.requestId;
}

beforeAll(async () => {
  redis = testRedis();
  dir = await mkdtemp(join(tmpdir(), 'cloudops-report-'));
  ops = await startOpsBot({
    redisUrl: testRedisUrl(),
    now: () => clock,
    policyYaml: POLICY,
  });
  // Week of 16 November: one change in each project, both run.
  ids.prod = await approved(OPS.channel, 'resize shop-prod 101 cores=4');
  clock = new Date(clock.getTime() + 3_600_000);
  ids.staging = await approved(STAGE, 'resize shop-staging 201 cores=2');
  // Week of 23 November: one rejected.
  clock = new Date(clock.getTime() + 7 * DAY);
  const posted = await submitRequest(flow(), OPS.dev, 'resize shop-prod 102 cores=6');
  await reject(flow(), OPS.lead, posted, 'not before the sale');
  await until(async () => (await stored(posted.requestId)).state === 'rejected');
  ids.rejected = posted.requestId;
  // Week of 30 November: one still waiting.
  clock = new Date(clock.getTime() + 7 * DAY);
  ids.pending = (await submitRequest(flow(), OPS.dev, 'resize shop-prod 101 ram=8')).requestId;
}, 120_000);
afterAll(async () => {
  await ops?.close();
  await redis.quit();
  await rm(dir, { recursive: true, force: true });
});

function report(args: string[]) {
  return runProcess(
    process.execPath,
    [BIN, 'report', '--from', '2026-11-16', '--to', '2026-12-06', ...args],
    {
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        REDIS_URL: testRedisUrl(),
        REDIS_PREFIX: ops.prefix,
        POLICY_FILE: join(dir, 'none.yml'),
        SEAL_KEY: TEST_SEAL_KEY,
      },
    },
  );
}

describe('cloudops report', () => {
  it('writes one CSV row per request of the period, exactly', async () => {
    const run = await report(['--format', 'csv']);
    expect(run.stderr).toBe('');
    const version = policyVersionOf(JSON.stringify(ops.policy));
    const row = async (
      id: string,
      change: string,
      approvers: string,
      outcome: (r: CloudRequest) => string,
    ) => {
      const r = await stored(id);
      const cost = r.cost?.diffMonthly ? `${r.cost.diffMonthly} EUR` : '';
      const methods = approvers ? 'slack' : '';
      return [
        r.createdAt,
        id,
        r.projectName,
        r.vmid,
        change,
        cost,
        OPS.dev,
        approvers,
        methods,
        '', // no break glass
        '', // no ticket
        r.approvalRule ?? '',
        outcome(r),
        version,
      ].join(',');
    };
    const task = (r: CloudRequest) => {
      const last = r.outcomes.at(-1);
      return `succeeded: ${last?.taskId ? `task ${last.taskId}` : `${last?.status} ${last?.message}`}`;
    };
    const expected = [
      'When (UTC),Request,Project,VM,Change,Monthly cost difference,Requester,Approvers,Methods,Break glass,Ticket,Rule,Outcome,Policy version',
      await row(ids.prod!, 'cores 2 → 4', `${OPS.lead} (slack)`, task),
      await row(ids.staging!, 'cores 1 → 2', `${OPS.lead} (slack)`, task),
      await row(ids.rejected!, 'cores 4 → 6', '', () => `rejected by ${OPS.lead}: not before the sale`),
      await row(ids.pending!, 'ram_gb 4 → 8', '', () => 'pending'),
    ];
    expect(run.stdout).toBe(`${expected.join('\r\n')}\r\n`);
    const only = await report(['--project', 'shop-staging']);
    expect(only.stdout.trim().split('\r\n')).toHaveLength(2);
    expect(only.stdout).toContain(ids.staging);
  });

  it('writes one self-contained HTML file with the summary, the weekly chart and every row', async () => {
    const out = join(dir, 'report.html');
    const run = await report(['--format', 'html', '--out', out]);
    expect(run.stdout).toBe(`4 requests written to ${out}\n`);
    const html = await readFile(out, 'utf8');
    if (process.env.CLOUDOPS_REPORT_HTML)
      await import('node:fs/promises').then((fs) =>
        fs.copyFile(out, process.env.CLOUDOPS_REPORT_HTML as string),
      );
    // Nothing is fetched: no script, no external stylesheet, image, font or link.
    expect(html).not.toMatch(/<script|<link|<img|<iframe|src=|href=|url\(|@import/i);
    const card = (label: string) => new RegExp(`${label}</span><b[^>]*>([^<]*)</b>`).exec(html)?.[1];
    expect(card('Requests')).toBe('4');
    expect(card('Rejected by an approver')).toBe('1');
    expect(card('Refused \\(rules or API\\)')).toBe('0');
    expect(card('Break glass')).toBe('0');
    expect(card('Verified approvals')).toBe('0 %');
    expect(card('Audit chain')).toBe('verified');
    expect(html).toMatch(
      /The audit chain verified when this report was made: \d+ entries, hashes and seals\./,
    );
    // Three weeks, the first with both projects: four bars.
    expect(html.match(/<rect /g)).toHaveLength(4);
    expect(html).toContain('shop-staging, week of 2026-11-16: 1');
    expect(html).toContain('shop-prod, week of 2026-11-30: 1');
    const rows = [...html.matchAll(/<tr(?: class="(\w+)")?><td>/g)].map((m) => m[1] ?? '');
    expect(rows).toEqual(['', '', 'refused', '']);
    for (const id of Object.values(ids)) expect(html).toContain(`<td>${id}</td>`);
    expect(html).toContain('<td>cores 2 → 4</td>');
  });

  it('refuses bad dates with one line and exit 2', async () => {
    const run = await runProcess(
      process.execPath,
      [BIN, 'report', '--from', '2026-02-30', '--to', '2026-03-01'],
      {
        env: { PATH: process.env.PATH ?? '', REDIS_URL: testRedisUrl() },
      },
    );
    expect(run.code).toBe(2);
    expect(run.stderr).toBe('cloudops: --from: expected a date such as 2026-01-31, got "2026-02-30"\n');
  });
});
