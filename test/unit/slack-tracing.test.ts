import { describe, expect, it } from 'vitest';
import { describeSlackRequest } from '../../src/slack/tracing.ts';

describe('the span of a Slack request', () => {
  it('is named by the kind of request and its ids, never by what was typed', () => {
    const command = describeSlackRequest({
      command: '/cloud',
      text: 'resize shop-prod 102 cores=6 xoxb-pasted-token',
      team_id: 'T1',
      user_id: 'U1',
    });
    expect(command).toEqual({
      name: 'slack /cloud',
      attributes: {
        'slack.team_id': 'T1',
        'slack.user_id': 'U1',
        'slack.type': 'command',
        'slack.command': '/cloud',
      },
    });
    expect(JSON.stringify(command)).not.toContain('xoxb');

    expect(
      describeSlackRequest({
        type: 'block_actions',
        team: { id: 'T1' },
        user: { id: 'U2' },
        actions: [{ action_id: 'approve', value: 'R1' }],
      }),
    ).toEqual({
      name: 'slack block_actions approve',
      attributes: {
        'slack.team_id': 'T1',
        'slack.user_id': 'U2',
        'slack.type': 'block_actions',
        'slack.action_id': 'approve',
      },
    });
    const submission = describeSlackRequest({
      type: 'view_submission',
      team: { id: 'T1' },
      user: { id: 'U1' },
      view: {
        callback_id: 'resize',
        state: { values: { reason: { reason: { value: 'my secret reason' } } } },
      },
    });
    expect(submission.name).toBe('slack view_submission resize');
    expect(JSON.stringify(submission)).not.toContain('secret reason');
    expect(
      describeSlackRequest({
        type: 'event_callback',
        team_id: 'T1',
        event: { type: 'app_home_opened', user: 'U3' },
      }),
    ).toMatchObject({
      name: 'slack event app_home_opened',
      attributes: { 'slack.user_id': 'U3', 'slack.event': 'app_home_opened' },
    });
    // Whatever else arrives still gets a span, named as far as it can be.
    expect(describeSlackRequest(undefined).name).toBe('slack unknown');
  });
});
