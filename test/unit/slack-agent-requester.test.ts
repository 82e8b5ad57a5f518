import { describe, expect, it } from 'vitest';
import { SlackChecks } from '../../sim/slack/checks.ts';
import type { CloudRequest, NewRequest } from '../../src/requests/model/types.ts';
import { homeView } from '../../src/slack/blocks/home.ts';
import { jobsBlocks } from '../../src/slack/blocks/jobs.ts';
import { resizeRequest } from '../fixtures/requests.ts';

const checks = new SlackChecks();
const at = new Date('2026-11-26T10:00:00Z');

function stored(input: NewRequest, patch: Partial<CloudRequest> = {}): CloudRequest {
  return {
    ...input,
    id: 'RAGENT01',
    version: 1,
    createdAt: at.toISOString(),
    updatedAt: at.toISOString(),
    nextStep: 0,
    outcomes: [],
    ...patch,
  } as CloudRequest;
}

// An agent's request: the person it acts for is the requester of record, the agent is named beside them.
const byAgent = stored(resizeRequest({ requester: 'U0DEV', agent: { name: 'deploy-agent' } }));

describe('who asked, when an agent did', () => {
  it('/cloud jobs says the agent and the person it asked for; a cancel by the agent names the agent', () => {
    const cancelled = { ...byAgent, state: 'cancelled' as const, cancelledBy: 'agent:deploy-agent' };
    const text = JSON.stringify(jobsBlocks([byAgent, cancelled]).blocks);
    expect(text).toContain('by agent deploy-agent for <@U0DEV>');
    expect(text).toContain('cancelled by agent deploy-agent');
    expect(text).not.toContain('<@agent:');
  });

  it('the App Home of an approver shows it as asked by the agent for the person, and passes home_view', () => {
    const view = homeView(
      {
        user: 'U0LEAD',
        waiting: [byAgent],
        moreWaiting: { count: 0, channels: [] },
        mine: [],
        scheduled: [],
        moreScheduled: 0,
      },
      at,
    );
    expect(checks.checkView(view)).toEqual([]);
    expect(JSON.stringify(view)).toContain('Asked by agent deploy-agent for <@U0DEV>');
  });
});
