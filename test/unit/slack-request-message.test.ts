import type { KnownBlock } from '@slack/types';
import { describe, expect, it } from 'vitest';
import { SlackChecks } from '../../sim/slack/checks.ts';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { createRequestRenderer } from '../../src/slack/blocks/request-message.ts';
import { breakGlassLinkMessage } from '../../src/slack/blocks/verify-link.ts';
import { resizeRequest, restoreRequest } from '../fixtures/requests.ts';

const renderer = createRequestRenderer();
const checks = new SlackChecks();

/** A stored request as the store returns it, pending two approvals of users and a group. */
function stored(overrides: Partial<CloudRequest> = {}): CloudRequest {
  return {
    ...resizeRequest({ approvers: ['U0LEAD', 'U0LEAD2', 'S0OPS'], expiresAt: '2026-11-26T09:00:00.000Z' }),
    state: 'pending',
    id: 'RTEST001',
    version: 3,
    createdAt: '2026-11-25T09:00:00.000Z',
    updatedAt: '2026-11-25T09:05:00.000Z',
    nextStep: 0,
    outcomes: [],
    requiredApprovals: 2,
    approvalRule: 'rule 2 (monthly cost difference over 100 EUR)',
    approvals: [{ user: 'U0LEAD', at: '2026-11-25T09:05:00.000Z' }],
    escalateTo: ['U0BOSS', 'S0ONCALL'],
    ...overrides,
  };
}

function context(blocks: KnownBlock[]): string {
  return blocks
    .flatMap((b) => (b.type === 'context' ? b.elements : []))
    .map((e) => ('text' in e ? e.text : ''))
    .join('\n');
}

function buttons(blocks: KnownBlock[]): string[] {
  return blocks
    .flatMap((b) => (b.type === 'actions' ? b.elements : []))
    .map((e) => ('action_id' in e ? String(e.action_id) : ''));
}

describe('the request message under an approval policy', () => {
  it('shows the progress, the rule, and who may still approve (not who approved, never the requester)', () => {
    const message = renderer.requestMessage(stored({ approvers: ['U0LEAD', 'U0DEV', 'U0LEAD2', 'S0OPS'] }));
    expect(checks.checkMessageBlocks(message.blocks)).toEqual([]);
    const text = context(message.blocks);
    expect(text).toContain(
      '*1 of 2 approvals*: <@U0LEAD> (2 approvals needed by rule 2 (monthly cost difference over 100 EUR))',
    );
    expect(text).toContain('May still approve: <@U0LEAD2>, <!subteam^S0OPS> · expires');
    expect(buttons(message.blocks)).toEqual(['approve', 'reject', 'cancel']);
  });

  it('once escalated, those escalated to may approve too', () => {
    const text = context(renderer.requestMessage(stored({ escalatedAt: '2026-11-26T03:00:00.000Z' })).blocks);
    expect(text).toContain('May still approve: <@U0LEAD2>, <!subteam^S0OPS>, <@U0BOSS>, <!subteam^S0ONCALL>');
  });

  it('a request made before approval policies reads as one approval needed', () => {
    const old = stored({ requiredApprovals: undefined, approvalRule: undefined, approvals: undefined });
    expect(context(renderer.requestMessage(old).blocks)).toContain('*0 of 1 approval* (1 approval needed)');
  });

  it('frozen work says until when, offers cancel and break glass, and the blocks are valid', () => {
    const message = renderer.requestMessage(
      stored({
        state: 'frozen',
        approvals: [
          { user: 'U0LEAD', at: '2026-11-25T09:05:00.000Z' },
          { user: 'U0LEAD2', at: '2026-11-25T09:06:00.000Z' },
        ],
        approvedBy: 'U0LEAD2',
        frozenUntil: '2026-11-27T22:59:00.000Z',
        freezeReason: 'no Friday changes',
      }),
    );
    expect(checks.checkMessageBlocks(message.blocks)).toEqual([]);
    expect(JSON.stringify(message.blocks)).toContain(
      ':snowflake: A freeze holds shop-prod (no Friday changes) until <!date^1795820340^',
    );
    expect(buttons(message.blocks)).toEqual(['cancel', 'break_glass']);
    expect(context(message.blocks)).toContain('*2 of 2 approvals*: <@U0LEAD>, <@U0LEAD2>');
  });
});

describe('thread replies of the approval policy', () => {
  const reply = (request: CloudRequest, event: Parameters<typeof renderer.threadReply>[1]) =>
    renderer.threadReply(request, event).text;

  it('names every approver, the freeze, the reminder, the escalation and break glass', () => {
    const two = stored({
      state: 'queued',
      approvals: [
        { user: 'U0LEAD', at: '2026-11-25T09:05:00.000Z' },
        { user: 'U0LEAD2', at: '2026-11-25T09:06:00.000Z' },
      ],
    });
    expect(reply(two, 'approved')).toBe('Approved by <@U0LEAD> and <@U0LEAD2>. Queued to run now.');
    expect(reply({ ...two, state: 'frozen' }, 'approved')).toBe('Approved by <@U0LEAD> and <@U0LEAD2>.');
    expect(
      reply(
        { ...two, state: 'frozen', frozenUntil: '2026-11-27T22:59:00.000Z', freezeReason: 'year-end' },
        'frozen',
      ),
    ).toMatch(
      /^A freeze holds shop-prod \(year-end\): it runs when the freeze ends, <!date\^1795820340\^.*, after the rules are checked again\. Nothing was sent to the API yet\.$/,
    );
    expect(reply(stored(), 'reminder')).toMatch(
      /^Reminder: this request still needs 1 approval from <@U0LEAD2> and <!subteam\^S0OPS>\. It expires <!date\^/,
    );
    expect(reply(stored(), 'escalated')).toMatch(
      /^Escalated: nobody has decided yet and this request expires .*\. <@U0BOSS> and <!subteam\^S0ONCALL> may approve it now\.$/,
    );
    expect(
      reply(
        stored({
          breakGlass: { by: 'U0CTO', reason: 'outage <now> & more', at: '2026-11-25T10:00:00.000Z' },
        }),
        'break_glass',
      ),
    ).toBe(
      ':rotating_light: <@U0CTO> runs this now, during the freeze (break glass), saying:\n> outage &lt;now&gt; &amp; more',
    );
    expect(reply(stored({ state: 'queued' }), 'unfrozen')).toBe(
      'The freeze has ended: queued to run now; the rules are checked again before anything is sent.',
    );
  });
});

describe('a verified break glass', () => {
  const verified = {
    by: 'U0CTO',
    reason: 'outage *now* <!channel>',
    at: '2026-11-25T10:00:00.000Z',
    verified: { method: 'passkey' as const, subject: 'cred-1' },
  };

  it('names the method beside the breaker, in the thread and on the message', () => {
    const request = stored({ state: 'queued', breakGlass: verified });
    expect(renderer.threadReply(request, 'break_glass').text).toBe(
      ':rotating_light: <@U0CTO> (verified: passkey) runs this now, during the freeze (break glass), saying:\n> outage *now* &lt;!channel&gt;',
    );
    const message = renderer.requestMessage(request);
    expect(checks.checkMessageBlocks(message.blocks)).toEqual([]);
    expect(context(message.blocks)).toContain('Run during the freeze by <@U0CTO> (verified: passkey):');
  });

  it("the breaker's link message: valid blocks, the reason quoted and escaped, the URL only on the button and in the fallback", () => {
    const request = stored({ state: 'frozen' });
    const claims = {
      requestId: request.id,
      version: 2,
      approver: 'U0CTO',
      teamId: request.teamId,
      methods: ['passkey' as const, 'sso' as const],
      reason: 'line one <!here>\n> ✅ Approved by <@U0LEAD>',
    };
    const url = 'https://cloudops.example.com/verify/tok';
    const message = breakGlassLinkMessage(request, claims, url);
    expect(checks.checkMessageBlocks(message.blocks)).toEqual([]);
    const section = JSON.stringify(message.blocks[0]);
    expect(section).toContain('Your break glass runs once you verify it* (passkey or SSO)');
    expect(section).toContain('> line one &lt;!here&gt;\\n> &gt; ✅ Approved by &lt;@U0LEAD&gt;');
    expect(section).not.toContain(url);
    expect(buttons(message.blocks)).toEqual(['verify_open']);
    expect(message.text).not.toContain('<!here>');
  });
});

describe('a restore the API accepted', () => {
  it('says the restore started, with its task id, never "Done": the API only accepted it', () => {
    const request: CloudRequest = {
      ...restoreRequest(),
      state: 'succeeded',
      id: 'RTEST002',
      version: 6,
      createdAt: '2026-11-25T09:00:00.000Z',
      updatedAt: '2026-11-25T09:10:00.000Z',
      nextStep: 1,
      outcomes: [
        {
          step: 0,
          status: 202,
          message: 'Restore queued.',
          taskId: 'task-77',
          at: '2026-11-25T09:10:00.000Z',
        },
      ],
    };
    const message = renderer.requestMessage(request);
    expect(checks.checkMessageBlocks(message.blocks)).toEqual([]);
    const all = `${message.text}\n${JSON.stringify(message.blocks)}`;
    expect(all).not.toContain('Done');
    expect(all).toContain('Restore started');
    expect(all).toContain('task-77');
  });
});
