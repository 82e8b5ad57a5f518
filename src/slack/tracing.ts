import type { App } from '@slack/bolt';
import { inSpan, type SpanAttributes } from '../observability/tracing.ts';

/** What the span of one Slack request is called and carries: the kind of request and its ids, never typed text. */
export function describeSlackRequest(body: unknown): { name: string; attributes: SpanAttributes } {
  const b = (body ?? {}) as {
    type?: string;
    command?: string;
    team_id?: string;
    user_id?: string;
    team?: { id?: string } | null;
    user?: { id?: string } | null;
    actions?: { action_id?: string }[];
    view?: { callback_id?: string };
    callback_id?: string;
    event?: { type?: string; user?: string };
  };
  const team = b.team_id ?? b.team?.id;
  const user = b.user_id ?? b.user?.id ?? b.event?.user;
  const common = { 'slack.team_id': team, 'slack.user_id': user };
  if (b.command)
    return {
      name: `slack ${b.command}`,
      attributes: { ...common, 'slack.type': 'command', 'slack.command': b.command },
    };
  if (b.type === 'event_callback' || b.event) {
    const event = b.event?.type ?? 'unknown';
    return {
      name: `slack event ${event}`,
      attributes: { ...common, 'slack.type': 'event', 'slack.event': event },
    };
  }
  if (b.type === 'block_actions') {
    const action = b.actions?.[0]?.action_id ?? 'unknown';
    return {
      name: `slack block_actions ${action}`,
      attributes: { ...common, 'slack.type': 'block_actions', 'slack.action_id': action },
    };
  }
  const callback = b.view?.callback_id ?? b.callback_id;
  const type = b.type ?? 'unknown';
  return {
    name: callback ? `slack ${type} ${callback}` : `slack ${type}`,
    attributes: { ...common, 'slack.type': type, 'slack.callback_id': callback },
  };
}

/**
 * Makes every Slack request (command, click, submission, event; over HTTP and Socket Mode alike) the first span of
 * its trace: registered before any other middleware, so a refused request is traced too. Only when tracing is on.
 */
export function registerTracing(app: App): void {
  app.use(async ({ body, next }) => {
    const { name, attributes } = describeSlackRequest(body);
    await inSpan(name, { kind: 'server', attributes }, () => next());
  });
}
