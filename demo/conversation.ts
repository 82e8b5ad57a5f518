import type { SlackStandIn } from '../sim/slack/server.ts';
import { readMrkdwn, renderMessage, renderModal } from './render.ts';
import type { Ack } from './slack-requests.ts';

/** Something that showed on someone's screen, with when it arrived. */
interface Seen {
  at: number;
  lines: string[];
}

const indent = (text: string, by = '    ') =>
  text
    .split('\n')
    .map((line) => `${by}${line}`)
    .join('\n');

/**
 * Prints the session as the people in the channel read it: what they typed, and what the bot showed them (ephemeral
 * answers, modals, modal errors, channel messages and edits, thread replies), from what reached the Slack stand-in.
 */
export class Conversation {
  private callsSeen = 0;
  private responsesSeen = 0;

  constructor(
    private readonly slack: SlackStandIn,
    private readonly names: Record<string, string>,
    private readonly write: (text: string) => void,
  ) {}

  /** A step's heading. */
  step(title: string): void {
    this.write(`\n━━ ${title} ${'━'.repeat(Math.max(3, 72 - title.length))}\n`);
  }

  /** What a person did. */
  says(user: string, text: string): void {
    this.write(`\n${this.names[user] ?? user} › ${text}\n`);
  }

  /** A short note from the narrator, not from Slack. */
  note(text: string): void {
    this.write(`  (${text})\n`);
  }

  /** The bot's direct HTTP answer to a command or a modal submission (`view`: the modal it answers). */
  ack(ack: Ack, user: string, view?: Record<string, unknown>): void {
    const json = ack.json;
    if (!json) return;
    if (json.response_action === 'errors') {
      // Slack shows each error under its input: name the input by its label, as the person sees it.
      const blocks = (Array.isArray(view?.blocks) ? view.blocks : []) as {
        block_id?: string;
        label?: { text?: string };
      }[];
      const label = (id: string) => blocks.find((b) => b.block_id === id)?.label?.text ?? id;
      const errors = Object.entries((json.errors ?? {}) as Record<string, string>);
      const lines = errors.map(([field, message]) => `✗ ${label(field)}: ${readMrkdwn(message, this.names)}`);
      this.write(`cloudops (in the modal, to ${this.names[user] ?? user}):\n${indent(lines.join('\n'))}\n`);
    } else if (json.response_action === 'push' || json.response_action === 'update') {
      this.write(
        `cloudops (modal):\n${indent(renderModal(json.view as Record<string, unknown>, this.names))}\n`,
      );
    } else if (json.text !== undefined || json.blocks !== undefined) {
      this.write(
        `cloudops (only visible to ${this.names[user] ?? user}):\n${indent(renderMessage(json, this.names))}\n`,
      );
    }
  }

  /** Prints everything that reached Slack since the last flush, in arrival order. */
  flush(): void {
    const seen: Seen[] = [];
    for (const call of this.slack.calls.slice(this.callsSeen)) {
      if (call.status !== 200 || call.response.ok !== true) continue;
      const lines = this.callLines(call.method, call.args);
      if (lines.length > 0) seen.push({ at: call.at.getTime(), lines });
    }
    this.callsSeen = this.slack.calls.length;
    for (const post of this.slack.responses.slice(this.responsesSeen)) {
      const body = post.body as {
        text?: string;
        blocks?: unknown;
        response_type?: string;
        delete_original?: boolean;
      };
      if (body.delete_original) continue;
      const who = body.response_type === 'in_channel' ? 'cloudops' : 'cloudops (only visible to you)';
      seen.push({ at: post.at.getTime(), lines: [`${who}:`, indent(renderMessage(body, this.names))] });
    }
    this.responsesSeen = this.slack.responses.length;
    for (const item of seen.sort((a, b) => a.at - b.at)) this.write(`${item.lines.join('\n')}\n`);
  }

  private callLines(method: string, args: Record<string, unknown>): string[] {
    const message = { text: args.text as string | undefined, blocks: args.blocks };
    const channel = `#${this.names[String(args.channel)] ?? String(args.channel)}`;
    switch (method) {
      case 'chat.postMessage':
        return args.thread_ts
          ? [`  ↳ cloudops, in the thread:`, indent(renderMessage(message, this.names), '      ')]
          : [`cloudops in ${channel}:`, indent(renderMessage(message, this.names))];
      case 'chat.update':
        return [`cloudops edited its message in ${channel}:`, indent(renderMessage(message, this.names))];
      case 'chat.postEphemeral':
        return [
          `cloudops (only visible to ${this.names[String(args.user)] ?? String(args.user)}):`,
          indent(renderMessage(message, this.names)),
        ];
      case 'views.open':
      case 'views.push':
      case 'views.update':
        return [
          'cloudops opens a form:',
          indent(renderModal(args.view as Record<string, unknown>, this.names)),
        ];
      default:
        return [];
    }
  }
}
