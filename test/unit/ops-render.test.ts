import { describe, expect, it } from 'vitest';
import { readMrkdwn, renderMessage, renderModal } from '../../demo/render.ts';

const names = { U0BOB: 'bob', C0PROD: 'shop-prod' };

describe('demo rendering of Block Kit as plain text', () => {
  it('reads mrkdwn as Slack shows it: mentions, channels, links, bold, emoji, entities', () => {
    expect(
      readMrkdwn(
        '*Approved* by <@U0BOB> in <#C0PROD>: <https://x.example/a|the log> :white_check_mark: &lt;3',
        names,
      ),
    ).toBe('Approved by @bob in #shop-prod: the log ✅ <3');
    // Multiplication signs and snake_case survive; unknown emoji stay as typed.
    expect(readMrkdwn('2 * 3 and os_disk_gb :unknown_emoji:')).toBe('2 * 3 and os_disk_gb :unknown_emoji:');
  });

  it('renders a request message: header, section with fields, context, buttons', () => {
    const text = renderMessage(
      {
        text: 'fallback',
        blocks: [
          { type: 'header', text: { type: 'plain_text', text: 'Resize VM 102' } },
          {
            type: 'section',
            text: { type: 'mrkdwn', text: '*Cores*: 4 → 6' },
            fields: [{ type: 'mrkdwn', text: 'a\nb' }],
          },
          {
            type: 'context',
            elements: [
              { type: 'mrkdwn', text: 'by <@U0BOB>' },
              { type: 'plain_text', text: 'now' },
            ],
          },
          { type: 'divider' },
          {
            type: 'actions',
            elements: [
              { type: 'button', text: { type: 'plain_text', text: 'Approve' }, action_id: 'approve' },
              { type: 'button', text: { type: 'plain_text', text: 'Reject' }, action_id: 'reject' },
            ],
          },
        ],
      },
      names,
    );
    expect(text.split('\n')).toEqual([
      'RESIZE VM 102',
      'Cores: 4 → 6',
      '  a b',
      'by @bob  ·  now',
      '────────',
      '[Approve] [Reject]',
    ]);
    expect(renderMessage({ text: 'only *text*' })).toBe('only text');
  });

  it('renders a modal with its inputs as prefilled', () => {
    const text = renderModal({
      title: { type: 'plain_text', text: 'Restore a VM' },
      submit: { type: 'plain_text', text: 'Request' },
      blocks: [
        {
          type: 'input',
          label: { type: 'plain_text', text: 'VM id' },
          element: { type: 'plain_text_input', initial_value: '102' },
        },
        {
          type: 'input',
          optional: true,
          label: { type: 'plain_text', text: 'Confirm' },
          element: {
            type: 'checkboxes',
            options: [
              { text: { type: 'plain_text', text: 'Stopped' } },
              { text: { type: 'plain_text', text: 'Sure' } },
            ],
            initial_options: [{ text: { type: 'plain_text', text: 'Sure' } }],
          },
        },
      ],
    });
    expect(text.split('\n')).toEqual([
      '┌ Restore a VM   [Request]',
      '│ VM id *: [ 102 ]',
      '│ Confirm: ☐ Stopped  ☑ Sure',
    ]);
  });
});
