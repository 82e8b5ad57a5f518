import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readStoredChain } from '../../src/requests/audit/read.ts';
import { verifyChain } from '../../src/requests/audit/verify.ts';
import type { AuditRecord } from '../../src/requests/model/audit-record.ts';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { auditRecords } from '../helpers/audit-records.ts';
import {
  BREAKER,
  breakGlassLink,
  FREEZE_START,
  FREEZE_WINDOW,
  frozenVerified,
  OTHER_BREAKER,
  registerSoftPasskeys,
  submitBreakGlass,
} from '../helpers/break-glass.ts';
import { CHANNELS, type Harness, PROD_UUID, STAGING_UUID, USERS } from '../helpers/harness.ts';
import { TEST_SEAL_KEYS } from '../helpers/seal.ts';
import { PageTab, type SoftPasskey } from '../helpers/soft-passkey.ts';
import {
  approveEphemeral,
  startVerifyPage,
  submitRequest,
  urlButtonOf,
  verifiedPolicyYaml,
} from '../helpers/verified-approvals.ts';
import type { Forwarder } from '../helpers/verify-browser.ts';

// The worker's judgement of a break glass (docs/approvals.md#the-worker-judges, #break-glass-under-a-verify-rule),
// attacked as a Redis writer without SEAL_KEY or an operator's emergency would test it: the break glass is recorded
// through the real path (the Slack form, the real page over HTTP with a software passkey), the execute queue paused
// meanwhile as if no worker took the job yet; then the clock, the policy or the stored request moves, and the real
// worker of the bot judges it once the queue resumes.

const HOUR = 3_600_000;

/**
 * shop-frozen (VM 201, staging channel): one approval verified by a passkey, frozen for two days; shop-prod (VMs 101
 * and 102): one plain approval, verified by a passkey where it raises RAM, frozen by the top-level window.
 * `breakers` may break glass in both.
 */
const policy = (breakers: string[]) =>
  verifiedPolicyYaml({
    approvals: {
      count: 1,
      rules: [{ when: { kind: 'resize_up', change: 'ram' }, count: 1, verify: 'passkey' }],
    },
    staging: { name: 'shop-frozen', freeze: FREEZE_WINDOW },
    more: `break_glass: [${breakers.join(', ')}]\nfreeze:\n  - ${FREEZE_WINDOW}\n`,
  });

let h: Harness;
let forwarder: Forwarder;
let publicUrl: string;
let keys: Record<string, SoftPasskey> = {};

beforeAll(async () => {
  ({ h, forwarder, publicUrl } = await startVerifyPage({
    now: FREEZE_START,
    policyFile: true,
    policyYaml: () => policy([BREAKER, OTHER_BREAKER]),
  }));
  keys = await registerSoftPasskeys(h, publicUrl, [USERS.lead, BREAKER]);
}, 120_000);

afterAll(async () => {
  await h?.close();
  await forwarder?.close();
});

const keyOf = (user: string) => keys[user] as SoftPasskey;

/** The POSTs the cloud sim received for `project`'s VM `vmid` resized to `cores`. */
const postsFor = (project: string, vmid: number, cores: number) =>
  h.sim.applied.filter(
    (a) => a.projectUuid === project && a.vmid === vmid && (a.body as { cores?: number }).cores === cores,
  ).length;

const ended = (id: string) =>
  h.waitForRequest(id, (r) => ['succeeded', 'refused', 'unknown'].includes(r.state), 30_000);

const frozenStaging = (cores: number) => frozenVerified(h, cores, keyOf(USERS.lead));

/** A resize of shop-prod's `vmid` to `cores`, approved by a plain click of the lead, held by the freeze. */
async function frozenPlain(vmid: number, cores: number): Promise<CloudRequest> {
  const created = await submitRequest(h, `resize shop-prod ${vmid} cores=${cores}`, CHANNELS.prod);
  await h.click('approve', created.id, USERS.lead, CHANNELS.prod);
  return h.waitForRequest(created.id, (r) => r.state === 'frozen');
}

/** The break glass of frozen `request` verified on the page with the breaker's passkey, its job queued. */
async function verifiedBreakGlass(request: CloudRequest, reason: string): Promise<void> {
  const tab = await PageTab.open(await breakGlassLink(h, publicUrl, request, reason));
  expect((await tab.approve(keyOf(BREAKER))).body).toMatchObject({ title: 'Running now', tone: 'ok' });
  await h.waitForRequest(request.id, (r) => r.breakGlass !== undefined);
  await h.waitForJob(request.id);
}

/** Runs `body` with the execute queue paused (no worker takes a job), resuming it at the end. */
async function withQueuePaused<T>(body: () => Promise<T>): Promise<T> {
  await h.queues.execute.pause();
  try {
    return await body();
  } finally {
    await h.queues.execute.resume();
  }
}

/** Rewrites the stored request as a Redis writer would: parse, edit, write back. */
async function tamper(id: string, edit: (request: CloudRequest) => void): Promise<void> {
  const key = `${h.prefix}:req:${id}`;
  const request = JSON.parse((await h.redis.get(key)) as string) as CloudRequest;
  edit(request);
  await h.redis.set(key, JSON.stringify(request));
}

describe('the worker judges a break glass', () => {
  it('a verification of no real method (slack, or empty) added in Redis to a sealed plain break glass is seal_invalid, nothing sent; the same on an approval', async () => {
    // Plain break glasses, sealed by the bot, on work whose approvals need no verification.
    const slack = await frozenPlain(101, 3);
    const empty = await frozenPlain(102, 6);
    const approval = await frozenPlain(101, 4);
    await withQueuePaused(async () => {
      for (const request of [slack, empty]) {
        await submitBreakGlass(h, request, 'plain click', CHANNELS.prod);
        await h.waitForRequest(request.id, (r) => r.state === 'queued' && r.breakGlass !== undefined);
        await h.waitForJob(request.id);
      }
      // Their seals cover {method: 'slack', subject: ''} for "no verification": a Redis writer without SEAL_KEY adds
      // a verification that rebuilds to the same sealed text, and the message would say "(verified: passkey)".
      await tamper(slack.id, (r) => {
        if (r.breakGlass) r.breakGlass.verified = { method: 'slack' as 'passkey', subject: '' };
      });
      await tamper(empty.id, (r) => {
        if (r.breakGlass) r.breakGlass.verified = {} as { method: 'passkey'; subject: string };
      });
      // The same on a plain approval, which the audit would then call an SSO login.
      await tamper(approval.id, (r) => {
        const first = r.approvals?.[0];
        if (first) first.verified = { method: 'slack' as 'passkey', subject: '' };
      });
      await submitBreakGlass(h, approval, 'plain click', CHANNELS.prod);
      await h.waitForRequest(approval.id, (r) => r.state === 'queued' && r.breakGlass !== undefined);
      await h.waitForJob(approval.id);
    });
    for (const request of [slack, empty, approval]) {
      const done = await ended(request.id);
      expect(`${request.id}: ${done.state}`).toBe(`${request.id}: refused`);
      expect(
        (await h.auditOf(request.id)).some((line) => line.startsWith('seal_invalid cloudops Not sent:')),
      ).toBe(true);
    }
    expect(postsFor(PROD_UUID, 101, 3)).toBe(0);
    expect(postsFor(PROD_UUID, 102, 6)).toBe(0);
    expect(postsFor(PROD_UUID, 101, 4)).toBe(0);
  });

  it('a breaker the policy no longer names in break_glass (removed by a reload after the page, before the run) lets nothing through the freeze', async () => {
    const request = await frozenStaging(3);
    await withQueuePaused(async () => {
      await verifiedBreakGlass(request, 'account about to be locked');
      // An operator removes the breaker (a compromised account, say) and reloads: the worker's policy says so now.
      expect(await h.reloadPolicy(policy([OTHER_BREAKER]))).toBe('changed');
    });
    try {
      const done = await ended(request.id);
      expect(done.state).toBe('refused');
      expect(done.outcomes.at(-1)?.reason).toContain('break_glass');
      expect(postsFor(STAGING_UUID, 201, 3)).toBe(0);
    } finally {
      expect(await h.reloadPolicy(policy([BREAKER, OTHER_BREAKER]))).toBe('changed');
    }
  });

  it('a resize that raises RAM and lowers cores, verified, its verify removed in Redis while frozen: a plain break glass from Slack sends nothing', async () => {
    // db-1 has 4 cores and 8 GB: 2 cores and 10 GB is planned as a decrease that must meet the increase's verify.
    const ack = await h.fillAndSubmit(
      'resize shop-prod 102 cores=2 ram=10',
      { confirm: ['stopped'] },
      USERS.dev,
      CHANNELS.prod,
    );
    expect(ack.json).toEqual({ response_action: 'clear' });
    const created = await h.waitForRequest(
      (await h.nextRequest(CHANNELS.prod)).id,
      (r) => r.messageTs !== undefined,
    );
    expect(created.verify).toEqual(['passkey']);
    const url = urlButtonOf((await approveEphemeral(h, created.id, USERS.lead, CHANNELS.prod)).blocks) ?? '';
    expect((await (await PageTab.open(url)).approve(keyOf(USERS.lead))).body.title).toBe('Approved');
    const frozen = await h.waitForRequest(created.id, (r) => r.state === 'frozen');
    // A Redis writer without SEAL_KEY drops what the request says it must verify (not sealed: the worker plans it
    // again under its own policy): the form then records a plain break glass, no link.
    await tamper(frozen.id, (r) => {
      delete r.verify;
    });
    await submitBreakGlass(h, frozen, 'plain click', CHANNELS.prod);
    const done = await ended(frozen.id);
    expect(done.breakGlass?.by).toBe(BREAKER);
    expect(done.breakGlass?.verified).toBeUndefined();
    expect(done.state).toBe('refused');
    expect(done.outcomes.at(-1)?.reason).toContain('not verified');
    expect(postsFor(PROD_UUID, 102, 2)).toBe(0);
  });

  it('a verified break glass moved in Redis (its time later, its revision, its breaker, its method) breaks its seal: seal_invalid, nothing sent', async () => {
    const edits: [number, (b: NonNullable<CloudRequest['breakGlass']>) => void][] = [
      [
        6,
        (b) => {
          b.at = new Date(Date.parse(b.at) + HOUR).toISOString();
        },
      ],
      [
        7,
        (b) => {
          b.revision = (b.revision ?? 1) - 1;
        },
      ],
      [
        8,
        (b) => {
          b.by = OTHER_BREAKER;
        },
      ],
      [
        9,
        (b) => {
          b.verified = { method: 'sso', subject: b.verified?.subject ?? '' };
        },
      ],
    ];
    const requests: CloudRequest[] = [];
    for (const [cores] of edits) requests.push(await frozenStaging(cores));
    await withQueuePaused(async () => {
      for (const [i, [, edit]] of edits.entries()) {
        const request = requests[i] as CloudRequest;
        await verifiedBreakGlass(request, 'to be moved');
        await tamper(request.id, (r) => {
          if (r.breakGlass) edit(r.breakGlass);
        });
      }
    });
    for (const [i, [cores]] of edits.entries()) {
      const request = requests[i] as CloudRequest;
      const done = await ended(request.id);
      expect(`${cores}: ${done.state}`).toBe(`${cores}: refused`);
      expect(
        (await h.auditOf(request.id)).some((line) => line.startsWith('seal_invalid cloudops Not sent:')),
      ).toBe(true);
      expect(postsFor(STAGING_UUID, 201, cores)).toBe(0);
    }
  });

  it('two tabs of one break-glass link verified at the same moment: it runs once, and the audit chain still verifies with its seals', async () => {
    const request = await frozenStaging(10);
    const seen = h.slack.ephemerals(CHANNELS.staging, BREAKER).length;
    await submitBreakGlass(h, request, 'two tabs', CHANNELS.staging);
    const message = await h.slack.waitFor(() => h.slack.ephemerals(CHANNELS.staging, BREAKER)[seen]);
    const url = urlButtonOf(message.blocks) ?? '';
    const tabs = [await PageTab.open(url), await PageTab.open(url)];
    const answers = await Promise.all(tabs.map((tab) => tab.approve(keyOf(BREAKER))));
    expect(answers.filter((a) => a.body.title === 'Running now')).toHaveLength(1);
    const done = await ended(request.id);
    expect(done.state).toBe('succeeded');
    expect(postsFor(STAGING_UUID, 201, 10)).toBe(1);
    expect(
      (await h.auditOf(request.id)).filter((line) => line.includes(' break glass (verified: passkey')),
    ).toHaveLength(1);
    const chain = await readStoredChain(h.redis, h.prefix);
    expect(
      verifyChain(chain.records, { head: chain.head, anchor: chain.anchor, sealer: TEST_SEAL_KEYS }),
    ).toMatchObject({ ok: true });
  });

  // The audit's entry builder copied the stored `breakGlass` whole into every later entry of the request (its decision
  // seal, its revision, and whatever a Redis writer adds beside them), where approvals carry only the user, method,
  // credential or subject and time.
  it("a verified break glass's audit entries carry what the audit says a break glass is, not its seal and revision", async () => {
    const request = await frozenStaging(11);
    await verifiedBreakGlass(request, 'audit shape');
    await ended(request.id);
    const records = (await auditRecords(h.redis, h.prefix)) as unknown as AuditRecord[];
    const carried = records.filter((r) => r.request_id === request.id && r.break_glass !== undefined);
    expect(carried.length).toBeGreaterThan(0);
    for (const record of carried)
      expect(Object.keys(record.break_glass ?? {}).sort()).toEqual(['at', 'by', 'reason', 'verified']);
  });

  // Last: it moves the clock a day on.
  it('a verified break glass stays good for approval_valid_hours from the break glass, not from the end of the freeze it broke', async () => {
    const request = await frozenStaging(12);
    await withQueuePaused(async () => {
      await verifiedBreakGlass(request, 'run it now');
      // The run is held past the validity (no worker took it: it could be a ticket system that is down, or a Redis
      // writer replaying it): 25 hours later, still inside the two-day freeze.
      h.clock.advance(25 * HOUR);
    });
    const done = await ended(request.id);
    expect(done.state).toBe('refused');
    expect(done.outcomes.at(-1)?.reason).toContain('approval_valid_hours');
    expect(postsFor(STAGING_UUID, 201, 12)).toBe(0);
  });
});
