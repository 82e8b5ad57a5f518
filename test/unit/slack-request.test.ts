import { describe, expect, it } from 'vitest';
import { slackSignature, viewState } from '../helpers/slack-request.ts';

describe('signed requests as Slack builds them', () => {
  it('matches the worked example of Slack’s request-signing documentation', () => {
    const body =
      'token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c';
    expect(slackSignature('8f742231b10e8888abcd99yyyzzz85a5', 1531420618, body)).toBe(
      'v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503',
    );
  });
});

describe('view state as Slack submits it', () => {
  const option = (value: string) => ({ text: { type: 'plain_text', text: value }, value });
  const view = {
    blocks: [
      { type: 'section', text: { type: 'mrkdwn', text: 'x' } },
      {
        type: 'input',
        block_id: 'cores',
        element: { type: 'plain_text_input', action_id: 'cores', initial_value: '2' },
      },
      { type: 'input', block_id: 'reason', element: { type: 'plain_text_input', action_id: 'reason' } },
      {
        type: 'input',
        block_id: 'wan',
        element: {
          type: 'static_select',
          action_id: 'wan',
          options: [option('off'), option('ipv4')],
          initial_option: option('ipv4'),
        },
      },
      {
        type: 'input',
        block_id: 'confirm',
        element: { type: 'checkboxes', action_id: 'confirm', options: [option('stopped')] },
      },
    ],
  };

  it('keeps initial values the person did not touch, and sends an emptied text input as null', () => {
    expect(viewState(view, { reason: '' })).toEqual({
      cores: { cores: { type: 'plain_text_input', value: '2' } },
      reason: { reason: { type: 'plain_text_input', value: null } },
      wan: { wan: { type: 'static_select', selected_option: option('ipv4') } },
      confirm: { confirm: { type: 'checkboxes', selected_options: [] } },
    });
  });

  it('sends whole option objects, and refuses values the view does not offer', () => {
    const state = viewState(view, { wan: 'off', confirm: ['stopped'] });
    expect(state.wan).toEqual({ wan: { type: 'static_select', selected_option: option('off') } });
    expect(state.confirm).toEqual({ confirm: { type: 'checkboxes', selected_options: [option('stopped')] } });
    expect(() => viewState(view, { wan: 'dual' })).toThrow('wan: dual is not one of the options');
    expect(() => viewState(view, { nowhere: 'x' })).toThrow('the view has no input block nowhere');
  });
});
