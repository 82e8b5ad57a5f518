import { describe, expect, it } from 'vitest';
import { ticketLine } from '../../src/slack/blocks/ticket.ts';

describe('the request message’s ticket line', () => {
  it('links the ticket and shows its state and window', () => {
    expect(
      ticketLine({
        system: 'servicenow',
        key: 'CHG0030001',
        url: 'https://example.service-now.com/nav_to.do?uri=change_request.do%3Fsys_id%3Dabc',
        state: 'Implement',
        window: { start: '2026-12-07T10:00:00.000Z', end: '2026-12-07T12:00:00.000Z' },
      }),
    ).toBe(
      '*Change ticket:* <https://example.service-now.com/nav_to.do?uri=change_request.do%3Fsys_id%3Dabc|CHG0030001> (Implement) · window 2026-12-07 10:00 UTC to 2026-12-07 12:00 UTC',
    );
  });

  it('a state the ticket system made up cannot mention the channel or break the link', () => {
    const line = ticketLine({
      system: 'jira',
      key: 'OPS-1',
      url: 'https://jira.example/browse/OPS-1|evil>',
      state: '<!channel> <https://evil.example|Approved>',
    });
    expect(line).not.toContain('<!channel>');
    expect(line).not.toContain('<https://evil.example');
    expect(line).toContain('<https://jira.example/browse/OPS-1%7Cevil%3E|OPS-1>');
  });
});
