/** Small text helpers for Block Kit: escaping, truncation and Slack's date formatting. */
import { cleanReason } from '../../rules/inputs.ts';

/** Escapes the three characters Slack's mrkdwn treats as markup (&, <, >). */
export function escapeMrkdwn(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Cuts text to `max` characters, marking the cut with an ellipsis. */
export function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, Math.max(0, max - 1))}…`;
}

/** A UTC fallback such as "2026-11-23 14:05 UTC". */
export function utcText(date: Date): string {
  return `${date.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** "Thu 26 Nov 14:00 UTC", rounded up to the minute (a lease's end is never shown before it comes). */
export function dayText(date: Date): string {
  const d = new Date(Math.ceil(date.getTime() / 60_000) * 60_000);
  const time = d.toISOString().slice(11, 16);
  return `${WEEKDAYS[d.getUTCDay()]} ${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]} ${time} UTC`;
}

/** A date each reader sees in their own time zone, with a UTC fallback for clients that cannot. */
export function slackDate(date: Date): string {
  const seconds = Math.floor(date.getTime() / 1000);
  return `<!date^${seconds}^{date_short_pretty} {time}|${utcText(date)}>`;
}

/** A mention of a Slack user. */
export function mention(userId: string): string {
  return `<@${userId}>`;
}

/** Who asked: a person's mention, or "agent deploy-agent for @person" for a request an agent made for them. */
export function requesterText(request: { requester: string; agent?: { name: string } }): string {
  return request.agent
    ? `agent ${escapeMrkdwn(request.agent.name)} for ${mention(request.requester)}`
    : mention(request.requester);
}

/** Who acted: a person's mention, or an agent (`agent:<name>`, as the audit names it) by its name. */
export function actorText(id: string): string {
  return id.startsWith('agent:') ? `agent ${escapeMrkdwn(id.slice('agent:'.length))}` : mention(id);
}

/** A mention of a user or, for an `S…` id, of a user group. */
export function mentionAny(id: string): string {
  return id.startsWith('S') ? `<!subteam^${id}>` : mention(id);
}

/** A plain_text object, cut to Slack's limit for where it goes. */
export function plain(text: string, max = 3000): { type: 'plain_text'; text: string; emoji: true } {
  return { type: 'plain_text', text: truncate(text, max), emoji: true };
}

/** A mrkdwn object, cut to Slack's 3000-character section limit. */
export function mrkdwn(text: string, max = 3000): { type: 'mrkdwn'; text: string } {
  return { type: 'mrkdwn', text: truncate(text, max) };
}

/**
 * Typed text (a reason) as a mrkdwn quote: every line behind `>`, escaped, without invisible characters, so nothing
 * typed can stand as a line of the bot's own ("✅ Approved by @lead") or reorder what follows it.
 */
export function quoted(typed: string, max = 1000): string {
  return truncate(cleanReason(typed), max)
    .split('\n')
    .map((line) => `> ${escapeMrkdwn(line)}`)
    .join('\n');
}

/** Typed text inside a line of the bot's own: escaped, between quotes, its line breaks shown as `↵`. */
export function inlineQuoted(typed: string, max = 300): string {
  return `“${escapeMrkdwn(truncate(cleanReason(typed).replace(/\s*\n\s*/g, ' ↵ '), max))}”`;
}

/**
 * Something a person typed, echoed back in an answer (an unknown word, a refused value) or an answer built around it:
 * escaped and without invisible characters, so that `<!channel>`, a disguised link or an RTL override is shown as
 * typed instead of acted on. Whatever the answer adds of its own (`<@…>`, `<#…>`) goes around it, never through it.
 */
export function typedText(text: string): string {
  return escapeMrkdwn(cleanReason(text));
}
