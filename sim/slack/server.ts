import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { type Problem, SLACK_REFERENCE_DIR, SlackChecks } from './checks.ts';
import { createSocketMode, type SocketModeStandIn } from './socket-mode.ts';

export type { Problem } from './checks.ts';

/** One Web API call as the stand-in received it (token removed, JSON-in-form arguments parsed). */
export interface SlackCall {
  method: string;
  args: Record<string, unknown>;
  at: Date;
  /** When it was answered, epoch ms with sub-millisecond precision (performance.timeOrigin based), for latencies. */
  atMs: number;
  /** HTTP status answered: 200, or 429 for a rate limit, or what `failNext` asked for. */
  status: number;
  response: Record<string, unknown>;
}

/** A message as it stands in a channel now (after chat.update), top level or in a thread. */
export interface SlackMessage {
  channel: string;
  ts: string;
  thread_ts?: string;
  text?: string;
  blocks?: unknown[];
  metadata?: unknown;
  files?: { id: string; title?: string }[];
  /** How many times chat.update or a response_url replaced it. */
  edits: number;
}

/** A message only one person sees: chat.postEphemeral, or an ephemeral response_url answer. */
export interface EphemeralMessage {
  channel: string;
  user?: string;
  ts: string;
  thread_ts?: string;
  text?: string;
  blocks?: unknown[];
  via: 'chat.postEphemeral' | 'response_url';
}

/** A view as views.open/push/update set it. */
export interface SlackView {
  id: string;
  method: 'views.open' | 'views.push' | 'views.update';
  view: Record<string, unknown>;
  triggerId?: string;
  at: Date;
}

/** A Home tab as views.publish set it for one person. */
export interface PublishedHome {
  user: string;
  view: Record<string, unknown>;
  at: Date;
}

/** One run of a workflow step (a custom function) that the stand-in started, and how the bot ended it. */
export interface FunctionExecution {
  id: string;
  callbackId: string;
  /** The token Slack sends with the step (`bot_access_token`); only valid for this execution. */
  token: string;
  inputs: Record<string, unknown>;
  state: 'running' | 'completed' | 'failed';
  outputs?: Record<string, unknown>;
  error?: string;
}

/** The output parameters a function declares (the manifest's), to check completeSuccess against. */
export interface FunctionOutputs {
  [callbackId: string]: { name: string; type: string; is_required?: boolean }[];
}

/** One POST to a response_url the stand-in handed out. */
export interface ResponseUrlPost {
  id: string;
  body: Record<string, unknown>;
  at: Date;
  status: number;
}

/** What the next call(s) of a method answer instead of succeeding. */
export interface FailOptions {
  /** Slack error code answered with HTTP 200 and `ok: false` (default `internal_error` when no status). */
  error?: string;
  /** HTTP status: 429 carries `Retry-After`, like Slack's rate limiting; others answer with that status. */
  status?: number;
  /** Seconds in `Retry-After` for a 429 (default 1). */
  retryAfter?: number;
  /** How many calls fail (default 1). */
  times?: number;
}

export interface StandInOptions {
  port?: number;
  /** The only token accepted (default `xoxb-test-token`). */
  botToken?: string;
  /** The only app-level token apps.connections.open accepts (default `xapp-1-test-token`). */
  appToken?: string;
  /** How long a Socket Mode delivery waits for its ack (default 5 s). */
  ackTimeoutMs?: number;
  teamId?: string;
  botUserId?: string;
  botId?: string;
  /** Slack's trigger_id lifetime; minted trigger ids older than this answer `expired_trigger_id`. */
  triggerTtlMs?: number;
  /** views.publish calls answered in a rolling minute before 429 (default Slack's Tier 4 floor, 100). */
  publishPerMinute?: number;
  /** Output parameters of the app's functions: functions.completeSuccess is checked against them. */
  functionOutputs?: FunctionOutputs;
  /** The bot token's scopes, answered in every call's `x-oauth-scopes` header (default: manifest.yml's bot scopes). */
  scopes?: string[];
  /** How far the `Date` header of every answer is from the wall clock; default 0. */
  dateSkewMs?: number;
}

/** A file as the bot uploaded it: what files.getUploadURLExternal was told, and the bytes POSTed to its URL. */
export interface UploadedFileRecord {
  id: string;
  filename: string;
  length: number;
  altText?: string;
  bytes?: Buffer;
  /** Set by files.completeUploadExternal. */
  title?: string;
  channel?: string;
  threadTs?: string;
}

/** Where a response_url's answer goes: the conversation, the person, and the message it may replace. */
export interface ResponseUrlTarget {
  channel: string;
  user?: string;
  messageTs?: string;
}

export interface SlackStandIn {
  /** Base of the Web API, ending with `/api/` (Bolt's `slackApiUrl`, env `SLACK_API_URL`). */
  apiUrl: string;
  /** Base URL of the server, without `/api/`. */
  url: string;
  botToken: string;
  teamId: string;
  botUserId: string;
  /** Socket Mode: apps.connections.open with the app-level token answers a ws:// URL on this server. */
  socket: SocketModeStandIn;
  /** Every Web API call, in arrival order. */
  calls: SlackCall[];
  /** What real Slack would refuse; tests assert it stays empty. */
  problems: Problem[];
  /** Every view set by views.open/push/update, in order. */
  views: SlackView[];
  /** Every POST to a response_url. */
  responses: ResponseUrlPost[];
  /** Every Home tab views.publish set, in order. */
  homes: PublishedHome[];
  /** Files uploaded through files.getUploadURLExternal, in order. */
  files(): UploadedFileRecord[];
  /** The Home tab `user` sees now, if one was published. */
  homeOf(user: string): Record<string, unknown> | undefined;
  /** Starts a workflow step run: its execution id and token, as a `function_executed` event carries them. */
  startFunction(callbackId: string, inputs: Record<string, unknown>): FunctionExecution;
  /** A step run by its execution id. */
  execution(id: string): FunctionExecution | undefined;
  /** Current messages (after updates and deletes), top level and replies, oldest first; all channels when omitted. */
  messages(channel?: string): SlackMessage[];
  /** Replies in the thread of `ts`, oldest first. */
  thread(channel: string, ts: string): SlackMessage[];
  /** How many thread replies there are now, in every channel (counted as they come, not by reading them). */
  threadReplyCount(): number;
  /** Ephemeral messages, optionally for one channel and user. */
  ephemerals(channel?: string, user?: string): EphemeralMessage[];
  /** Web API calls of one method. */
  callsOf(method: string): SlackCall[];
  /** A fresh response_url, as Slack puts in slash commands and interactions. */
  responseUrl(target: ResponseUrlTarget): string;
  /** A fresh trigger_id, valid for `triggerTtlMs` and one use. */
  triggerId(): string;
  /** Checks a payload that reached Slack another way (an `ack()` body): records problems, returns them. */
  checkPayload(where: string, payload: { blocks?: unknown; view?: unknown }): string[];
  /** Resolves with the predicate's first truthy value, re-checked after each call it receives; rejects after the timeout (30 s: generous, a loaded machine is slow). */
  waitFor<T>(predicate: () => T | undefined | null | false, timeoutMs?: number): Promise<T>;
  /** The next call(s) of `method` fail as told; several failNext calls on one method apply in the order given. */
  failNext(method: string, options?: FailOptions): void;
  /**
   * The next call of `method` takes effect but its answer comes `ms` later: a process killed meanwhile never learns
   * that Slack accepted it (the crash window between Slack's acceptance and the bot's record).
   */
  holdAnswer(method: string, ms: number): void;
  /** The bot leaves `channel` (or was never invited): posting, updating and ephemerals there answer `not_in_channel`. */
  leaveChannel(channel: string): void;
  /** The bot is invited (back) to `channel`. */
  joinChannel(channel: string): void;
  /**
   * Sets a user group's members for `usergroups.users.list`, or the error Slack answers for it (`missing_scope`,
   * `plan_upgrade_required`, …). A group never set answers `no_such_subteam`.
   */
  setUserGroup(id: string, members: string[] | { error: string }): void;
  /** An admin deactivates `user` (`users.info` answers `deleted: true`), or reactivates them. */
  deactivateUser(user: string, deactivated?: boolean): void;
  /** At most `perSecond` chat.* calls per channel per second; beyond, HTTP 429 with Retry-After. Undefined lifts it. */
  limitPerChannel(perSecond: number | undefined): void;
  /** The scopes the bot token has from now on (`x-oauth-scopes`), as after a reinstall with other scopes. */
  grantScopes(scopes: string[]): void;
  /** From now on the `Date` header is `ms` off the wall clock (0: right). */
  skewDate(ms: number): void;
  close(): Promise<void>;
}

/** Arguments that Slack takes as JSON, sent as strings in form-encoded calls. */
const JSON_ARGS = ['blocks', 'view', 'attachments', 'metadata', 'files', 'unfurled_attachments', 'outputs'];
/** Methods whose `blocks` argument is a message's blocks. */
const MESSAGE_METHODS = new Set([
  'chat.postMessage',
  'chat.update',
  'chat.postEphemeral',
  'files.completeUploadExternal',
]);
/** Methods that count against the per-channel posting limit. */
const CHANNEL_LIMITED = new Set(['chat.postMessage', 'chat.update', 'chat.postEphemeral', 'chat.delete']);
/** views.publish is Tier 4: at least 100 a minute per workspace; beyond, this stand-in answers 429. */
const PUBLISH_PER_MINUTE = 100;
/** Slack lets a response_url be used five times. */
const RESPONSE_URL_USES = 5;

type Answer = { status: number; body: Record<string, unknown>; headers?: Record<string, string> };

/**
 * A local stand-in for Slack's Web API on 127.0.0.1: answers the methods the bot uses, keeps channels' messages and
 * views, and checks each call against the method files and the Block Kit schema (see `problems`).
 */
export async function startSlackStandIn(options: StandInOptions = {}): Promise<SlackStandIn> {
  const botToken = options.botToken ?? 'xoxb-test-token';
  const teamId = options.teamId ?? 'T0TEST';
  const botUserId = options.botUserId ?? 'U0CLOUDOPS';
  const botId = options.botId ?? 'B0CLOUDOPS';
  const triggerTtlMs = options.triggerTtlMs ?? 3000;
  const checks = new SlackChecks();
  // Compiled now, so the first checked call is as fast as the others.
  checks.warmUp();
  const events = new EventEmitter();
  events.setMaxListeners(0);

  const calls: SlackCall[] = [];
  const problems: Problem[] = [];
  const views: SlackView[] = [];
  const responses: ResponseUrlPost[] = [];
  const messages: SlackMessage[] = [];
  // Looked up by channel and ts, and replies counted, without going through every message: a bench run posts tens of
  // thousands, and a scan per call made the stand-in slower with each run, taking the CPU the bot was measured on.
  const messageIndex = new Map<string, SlackMessage>();
  let threadReplyCount = 0;
  const messageKey = (channel: string, ts: string) => `${channel}\u0000${ts}`;
  const addMessage = (message: SlackMessage) => {
    messages.push(message);
    messageIndex.set(messageKey(message.channel, message.ts), message);
    if (message.thread_ts !== undefined) threadReplyCount++;
  };
  const removeMessage = (message: SlackMessage) => {
    const index = messages.indexOf(message);
    if (index < 0) return;
    messages.splice(index, 1);
    messageIndex.delete(messageKey(message.channel, message.ts));
    if (message.thread_ts !== undefined) threadReplyCount--;
  };
  const ephemerals: EphemeralMessage[] = [];
  const failures = new Map<string, (Required<Pick<FailOptions, 'times'>> & FailOptions)[]>();
  const triggers = new Map<string, { mintedAt: number; used: boolean }>();
  const responseUrls = new Map<string, ResponseUrlTarget & { uses: number }>();
  const uploads = new Map<string, UploadedFileRecord>();
  const sent = new Map<string, number[]>();
  let perSecond: number | undefined;
  const notMember = new Set<string>();
  const userGroups = new Map<string, string[] | { error: string }>();
  const deactivated = new Set<string>();
  const held = new Map<string, number[]>();
  const homes: PublishedHome[] = [];
  const executions = new Map<string, FunctionExecution>();
  const functionOutputs = options.functionOutputs ?? manifestOutputs();
  let scopes = options.scopes ?? manifestScopes();
  let dateSkewMs = options.dateSkewMs ?? 0;
  let counter = 0;
  let base = '';

  const nextTs = () => {
    counter += 1;
    return `${Math.floor(Date.now() / 1000)}.${String(counter).padStart(6, '0')}`;
  };
  const nextId = (letter: string) => {
    counter += 1;
    return `${letter}0${counter.toString(36).toUpperCase().padStart(8, '0')}`;
  };
  const problem = (method: string, why: string) => {
    problems.push({ method, why });
  };
  const checkPayload = (where: string, payload: { blocks?: unknown; view?: unknown }) => {
    const found: string[] = [];
    if (payload.blocks !== undefined) found.push(...checks.checkMessageBlocks(payload.blocks));
    if (payload.view !== undefined) found.push(...checks.checkView(payload.view));
    for (const why of found) problem(where, why);
    return found;
  };
  const socketMode = createSocketMode(
    { appToken: options.appToken ?? 'xapp-1-test-token', ackTimeoutMs: options.ackTimeoutMs },
    { problem, checkPayload },
  );
  const findMessage = (channel: string, ts: string) => messageIndex.get(messageKey(channel, ts));
  // Slack's answer to a method the token lacks the scope for (checked where a test takes a scope away).
  const missingScope = (needed: string) => ({
    ok: false,
    error: 'missing_scope',
    needed,
    provided: scopes.join(','),
  });

  function checkBlocks(method: string, args: Record<string, unknown>): string[] {
    const found: string[] = [];
    if (args.blocks !== undefined && MESSAGE_METHODS.has(method))
      found.push(...checks.checkMessageBlocks(args.blocks));
    if (args.view !== undefined && method.startsWith('views.')) found.push(...checks.checkView(args.view));
    return found;
  }

  function rateLimited(method: string, args: Record<string, unknown>): boolean {
    if (method === 'views.publish') {
      const now = Date.now();
      return (
        homes.filter((h) => now - h.at.getTime() < 60_000).length >=
        (options.publishPerMinute ?? PUBLISH_PER_MINUTE)
      );
    }
    if (perSecond === undefined || !CHANNEL_LIMITED.has(method) || typeof args.channel !== 'string')
      return false;
    const now = Date.now();
    const recent = (sent.get(args.channel) ?? []).filter((t) => now - t < 1000);
    if (recent.length >= perSecond) {
      sent.set(args.channel, recent);
      return true;
    }
    recent.push(now);
    sent.set(args.channel, recent);
    return false;
  }

  /** The method's effect on the stored state, once the call passed every check. */
  function perform(
    method: string,
    args: Record<string, unknown>,
    arrivedAt: number,
  ): Record<string, unknown> {
    const channel = typeof args.channel === 'string' ? args.channel : undefined;
    const blocks = Array.isArray(args.blocks) ? args.blocks : undefined;
    const text = typeof args.text === 'string' ? args.text : undefined;
    if (channel && notMember.has(channel) && CHANNEL_LIMITED.has(method))
      return { ok: false, error: 'not_in_channel' };
    switch (method) {
      case 'auth.test':
        return {
          url: 'https://cloudops-test.slack.com/',
          team: 'cloudops test',
          user: 'cloudops',
          team_id: teamId,
          user_id: botUserId,
          bot_id: botId,
        };
      case 'chat.postMessage': {
        // A user id posts to the person's direct messages with the app.
        if (!channel || !/^[CGDUW][A-Z0-9]+$/.test(channel)) return { ok: false, error: 'channel_not_found' };
        const threadTs = typeof args.thread_ts === 'string' ? args.thread_ts : undefined;
        if (threadTs !== undefined && !findMessage(channel, threadTs)) {
          problem(method, `thread_ts ${threadTs} is not a message in ${channel}`);
        }
        if (args.metadata !== undefined && !isMessageMetadata(args.metadata)) {
          problem(method, 'metadata must be an object with a string event_type and an object event_payload');
        }
        const ts = nextTs();
        addMessage({ channel, ts, thread_ts: threadTs, text, blocks, metadata: args.metadata, edits: 0 });
        return {
          channel,
          ts,
          message: {
            type: 'message',
            subtype: 'bot_message',
            bot_id: botId,
            text: text ?? '',
            blocks,
            ts,
            thread_ts: threadTs,
          },
        };
      }
      case 'chat.update': {
        const message = channel && typeof args.ts === 'string' ? findMessage(channel, args.ts) : undefined;
        if (!message) return { ok: false, error: 'message_not_found' };
        if (text !== undefined) message.text = text;
        // Slack keeps the previous blocks when `blocks` is not sent; an empty array removes them.
        if (blocks !== undefined) message.blocks = blocks;
        if (args.metadata !== undefined) message.metadata = args.metadata;
        message.edits += 1;
        return {
          channel,
          ts: message.ts,
          text: message.text,
          message: { text: message.text, blocks: message.blocks },
        };
      }
      case 'chat.delete': {
        const message = channel && typeof args.ts === 'string' ? findMessage(channel, args.ts) : undefined;
        if (!message) return { ok: false, error: 'message_not_found' };
        removeMessage(message);
        return { channel, ts: args.ts };
      }
      case 'chat.postEphemeral': {
        if (!channel) return { ok: false, error: 'channel_not_found' };
        const ts = nextTs();
        ephemerals.push({
          channel,
          user: typeof args.user === 'string' ? args.user : undefined,
          ts,
          thread_ts: typeof args.thread_ts === 'string' ? args.thread_ts : undefined,
          text,
          blocks,
          via: 'chat.postEphemeral',
        });
        return { message_ts: ts };
      }
      case 'chat.getPermalink':
        return {
          channel,
          permalink: `https://cloudops-test.slack.com/archives/${channel}/p${String(args.message_ts).replace('.', '')}`,
        };
      case 'views.open':
      case 'views.push': {
        const trigger = typeof args.trigger_id === 'string' ? triggers.get(args.trigger_id) : undefined;
        if (trigger?.used) return { ok: false, error: 'exchanged_trigger_id' };
        if (trigger && arrivedAt - trigger.mintedAt > triggerTtlMs)
          return { ok: false, error: 'expired_trigger_id' };
        if (trigger) trigger.used = true;
        const id = nextId('V');
        const view = {
          ...(args.view as Record<string, unknown>),
          id,
          team_id: teamId,
          state: { values: {} },
          hash: `${Date.now()}.${id}`,
          root_view_id: id,
          app_id: 'A0CLOUDOPS',
          bot_id: botId,
        };
        views.push({
          id,
          method,
          view,
          triggerId: typeof args.trigger_id === 'string' ? args.trigger_id : undefined,
          at: new Date(),
        });
        return { view };
      }
      case 'views.update': {
        const existing = [...views]
          .reverse()
          .find(
            (v) =>
              v.id === args.view_id ||
              (args.external_id !== undefined && v.view.external_id === args.external_id),
          );
        if (!existing) return { ok: false, error: 'not_found' };
        if (typeof args.hash === 'string' && args.hash !== existing.view.hash)
          return { ok: false, error: 'hash_conflict' };
        const view = {
          ...(args.view as Record<string, unknown>),
          id: existing.id,
          team_id: teamId,
          state: { values: {} },
          hash: `${Date.now()}.${existing.id}`,
        };
        views.push({ id: existing.id, method, view, at: new Date() });
        return { view };
      }
      case 'views.publish': {
        const user = String(args.user_id);
        if (!/^[UW][A-Z0-9]+$/.test(user)) return { ok: false, error: 'invalid_arguments' };
        const view = args.view as Record<string, unknown>;
        if (view.type !== 'home') problem(method, `a ${String(view.type)} view published as a Home tab`);
        homes.push({ user, view, at: new Date() });
        const id = nextId('V');
        return { view: { ...view, id, team_id: teamId, hash: `${Date.now()}.${id}`, app_id: 'A0CLOUDOPS' } };
      }
      case 'functions.completeSuccess':
      case 'functions.completeError':
        return completeFunction(method, args);
      case 'conversations.replies': {
        const parent = channel && typeof args.ts === 'string' ? findMessage(channel, args.ts) : undefined;
        if (!parent) return { ok: false, error: 'thread_not_found' };
        const root = parent.thread_ts ?? parent.ts;
        const withMetadata = args.include_all_metadata === true || args.include_all_metadata === 'true';
        const thread = messages
          .filter((m) => m.channel === channel && (m.ts === root || m.thread_ts === root))
          .map((m) => ({
            type: 'message',
            subtype: 'bot_message',
            bot_id: botId,
            text: m.text ?? '',
            ts: m.ts,
            thread_ts: root,
            ...(m.blocks ? { blocks: m.blocks } : {}),
            ...(withMetadata && m.metadata ? { metadata: m.metadata } : {}),
          }));
        const limit = typeof args.limit === 'number' ? args.limit : Number(args.limit ?? 1000) || 1000;
        return { messages: thread.slice(0, limit), has_more: thread.length > limit };
      }
      case 'conversations.history': {
        if (!scopes.includes('channels:history') && !scopes.includes('groups:history'))
          return missingScope('channels:history');
        if (!channel || !/^[CGD][A-Z0-9]+$/.test(channel)) return { ok: false, error: 'channel_not_found' };
        const withMetadata = args.include_all_metadata === true || args.include_all_metadata === 'true';
        const oldest = Number(args.oldest ?? 0) || 0;
        const latest = Number(args.latest ?? 0) || Number.POSITIVE_INFINITY;
        // Top-level messages, newest first, as Slack pages them: the cursor is the ts to continue below.
        const below = typeof args.cursor === 'string' && args.cursor !== '' ? Number(args.cursor) : latest;
        const found = messages
          .filter((m) => m.channel === channel && (!m.thread_ts || m.thread_ts === m.ts))
          .filter((m) => Number(m.ts) > oldest && Number(m.ts) < below)
          .sort((a, b) => Number(b.ts) - Number(a.ts));
        const limit = Math.min(Number(args.limit ?? 100) || 100, 999);
        const page = found.slice(0, limit).map((m) => ({
          type: 'message',
          subtype: 'bot_message',
          bot_id: botId,
          text: m.text ?? '',
          ts: m.ts,
          ...(m.blocks ? { blocks: m.blocks } : {}),
          ...(withMetadata && m.metadata ? { metadata: m.metadata } : {}),
        }));
        const more = found.length > limit;
        return {
          messages: page,
          has_more: more,
          ...(more ? { response_metadata: { next_cursor: page.at(-1)?.ts ?? '' } } : {}),
        };
      }
      case 'conversations.info':
        if (!scopes.includes('channels:read') && !scopes.includes('groups:read'))
          return missingScope('channels:read');
        if (!channel || !/^[CGD][A-Z0-9]+$/.test(channel)) return { ok: false, error: 'channel_not_found' };
        return {
          channel: {
            id: channel,
            name: channel.toLowerCase(),
            is_channel: true,
            is_member: !notMember.has(channel),
            is_archived: false,
          },
        };
      case 'users.info': {
        if (!scopes.includes('users:read')) return missingScope('users:read');
        const user = String(args.user);
        if (!/^[UW][A-Z0-9]+$/.test(user)) return { ok: false, error: 'user_not_found' };
        // As Slack does: the profile's email only with users:read.email.
        const email = scopes.includes('users:read.email')
          ? { email: `${user.toLowerCase()}@example.com` }
          : {};
        return {
          user: {
            id: user,
            team_id: teamId,
            name: user.toLowerCase(),
            real_name: `User ${user}`,
            tz: 'Europe/Berlin',
            tz_offset: 3600,
            is_bot: false,
            deleted: deactivated.has(user),
            profile: { real_name: `User ${user}`, display_name: user.toLowerCase(), ...email },
          },
        };
      }
      case 'usergroups.users.list': {
        if (!scopes.includes('usergroups:read')) return missingScope('usergroups:read');
        const group = userGroups.get(String(args.usergroup));
        if (!group) return { ok: false, error: 'no_such_subteam' };
        return Array.isArray(group) ? { users: [...group] } : { ok: false, error: group.error };
      }
      case 'apps.connections.open':
        return { url: socketMode.openUrl(base) };
      case 'files.getUploadURLExternal': {
        if (!scopes.includes('files:write')) return missingScope('files:write');
        const length = Number(args.length);
        if (!Number.isInteger(length) || length < 1)
          problem(method, `length ${String(args.length)} is not a size`);
        const id = nextId('F');
        uploads.set(id, {
          id,
          filename: String(args.filename),
          length,
          altText: typeof args.alt_txt === 'string' ? args.alt_txt : undefined,
        });
        return { upload_url: `${base}/upload/${id}`, file_id: id };
      }
      case 'files.completeUploadExternal': {
        if (!scopes.includes('files:write')) return missingScope('files:write');
        const files = Array.isArray(args.files) ? (args.files as { id: string; title?: string }[]) : [];
        for (const file of files) {
          const upload = uploads.get(file.id);
          if (!upload) return { ok: false, error: 'file_not_found' };
          if (!upload.bytes) problem(method, `file ${file.id} was never uploaded to its upload_url`);
        }
        const target = typeof args.channel_id === 'string' ? args.channel_id : undefined;
        if (target && notMember.has(target)) return { ok: false, error: 'not_in_channel' };
        if (target) {
          const threadTs = typeof args.thread_ts === 'string' ? args.thread_ts : undefined;
          if (threadTs !== undefined && !findMessage(target, threadTs))
            problem(method, `thread_ts ${threadTs} is not a message in ${target}`);
          for (const file of files) {
            const upload = uploads.get(file.id);
            if (upload) Object.assign(upload, { title: file.title, channel: target, threadTs });
          }
          addMessage({
            channel: target,
            ts: nextTs(),
            thread_ts: threadTs,
            text: typeof args.initial_comment === 'string' ? args.initial_comment : undefined,
            blocks,
            files,
            edits: 0,
          });
        }
        return { files: files.map((f) => ({ id: f.id, title: f.title ?? uploads.get(f.id)?.filename })) };
      }
      default:
        return {};
    }
  }

  /** Ends a step run the way Slack does: once, with outputs its function declares, by the token of that run. */
  function completeFunction(method: string, args: Record<string, unknown>): Record<string, unknown> {
    const token = args.__token;
    delete args.__token;
    const execution = executions.get(String(args.function_execution_id));
    if (!execution) return { ok: false, error: 'function_execution_not_found' };
    if (token !== execution.token) return { ok: false, error: 'access_denied' };
    if (execution.state !== 'running') return { ok: false, error: 'execution_not_in_running_state' };
    if (method === 'functions.completeError') {
      execution.state = 'failed';
      execution.error = String(args.error);
      return {};
    }
    const outputs = (args.outputs ?? {}) as Record<string, unknown>;
    const declared = functionOutputs[execution.callbackId];
    if (declared) {
      const unknown = Object.keys(outputs).filter((name) => !declared.some((p) => p.name === name));
      const missing = declared.filter((p) => p.is_required && outputs[p.name] === undefined);
      if (unknown.length > 0 || missing.length > 0) {
        problem(
          method,
          `outputs do not match ${execution.callbackId}'s output_parameters (unknown: ${unknown.join(', ') || 'none'}; missing: ${missing.map((p) => p.name).join(', ') || 'none'})`,
        );
        return { ok: false, error: 'parameter_validation_failed' };
      }
    }
    execution.state = 'completed';
    execution.outputs = outputs;
    return {};
  }

  function handleApi(
    method: string,
    args: Record<string, unknown>,
    authorization: string | undefined,
    arrivedAt: number,
  ): Answer {
    const bearer = authorization?.match(/^Bearer\s+(.+)$/i)?.[1];
    const token = bearer ?? (typeof args.token === 'string' ? args.token : undefined);
    delete args.token;
    const record = (answer: Answer): Answer => {
      calls.push({
        method,
        args,
        at: new Date(),
        atMs: performance.timeOrigin + performance.now(),
        status: answer.status,
        response: answer.body,
      });
      events.emit('call');
      return answer;
    };
    if (!checks.knows(method)) {
      problem(method, 'no method file: Slack has no such method, or the bot calls one nobody checked');
      return record({ status: 200, body: { ok: false, error: 'unknown_method' } });
    }
    if (token === undefined) return record({ status: 200, body: { ok: false, error: 'not_authed' } });
    // apps.connections.open takes the app-level token only; every other method the bot token, or a step run's own
    // token (completing a step is then checked against its run).
    const wanted = method === 'apps.connections.open' ? socketMode.standIn.appToken : botToken;
    const other = method === 'apps.connections.open' ? botToken : socketMode.standIn.appToken;
    if (token === other) return record({ status: 200, body: { ok: false, error: 'not_allowed_token_type' } });
    const stepToken = wanted === botToken && [...executions.values()].some((e) => e.token === token);
    if (token !== wanted && !stepToken)
      return record({ status: 200, body: { ok: false, error: 'invalid_auth' } });
    if (method.startsWith('functions.')) args.__token = token;

    const failure = failures.get(method)?.[0];
    if (failure) {
      failure.times -= 1;
      if (failure.times <= 0) failures.get(method)?.shift();
      if (failure.status === 429) {
        const retryAfter = String(failure.retryAfter ?? 1);
        return record({
          status: 429,
          body: { ok: false, error: 'ratelimited' },
          headers: { 'Retry-After': retryAfter },
        });
      }
      return record({
        status: failure.status ?? 200,
        body: { ok: false, error: failure.error ?? 'internal_error' },
      });
    }
    if (rateLimited(method, args)) {
      return record({
        status: 429,
        body: { ok: false, error: 'ratelimited' },
        headers: { 'Retry-After': '1' },
      });
    }

    if (args.__body instanceof Error) {
      problem(method, 'the JSON body does not parse');
      return record({ status: 200, body: { ok: false, error: 'invalid_json' } });
    }
    const { __token: _token, ...checked } = args;
    const argProblems = checks.checkArgs(method, checked);
    for (const why of argProblems) problem(method, why);
    if (argProblems.length > 0)
      return record({ status: 200, body: { ok: false, error: 'invalid_arguments' } });
    for (const name of JSON_ARGS) {
      if (args[name] instanceof Error) {
        problem(method, `\`${name}\` is not valid JSON`);
        return record({
          status: 200,
          body: { ok: false, error: name === 'blocks' ? 'invalid_blocks_format' : 'invalid_arguments' },
        });
      }
    }
    const blockProblems = checkBlocks(method, args);
    for (const why of blockProblems) problem(method, why);
    if (blockProblems.length > 0)
      return record({ status: 200, body: { ok: false, error: 'invalid_blocks' } });

    const result = perform(method, args, arrivedAt);
    return record({ status: 200, body: { ok: true, ...result } });
  }

  function handleResponseUrl(id: string, body: Record<string, unknown>): Answer {
    const target = responseUrls.get(id);
    const answer = (status: number, result: Record<string, unknown>): Answer => {
      responses.push({ id, body, at: new Date(), status });
      events.emit('call');
      return { status, body: result };
    };
    if (!target) return answer(404, { ok: false, error: 'invalid_url' });
    target.uses += 1;
    if (target.uses > RESPONSE_URL_USES) return answer(404, { ok: false, error: 'used_url' });
    const found: string[] = [];
    if (body.blocks !== undefined) found.push(...checks.checkMessageBlocks(body.blocks));
    if (body.text === undefined && body.blocks === undefined && body.delete_original !== true)
      found.push('no `text` or `blocks`');
    for (const why of found) problem('response_url', why);
    if (found.length > 0) return answer(400, { ok: false, error: 'invalid_blocks' });

    const original = target.messageTs ? findMessage(target.channel, target.messageTs) : undefined;
    const text = typeof body.text === 'string' ? body.text : undefined;
    const blocks = Array.isArray(body.blocks) ? body.blocks : undefined;
    if (body.delete_original === true) {
      if (original) removeMessage(original);
      return answer(200, { ok: true });
    }
    if (body.replace_original === true && original) {
      original.text = text;
      original.blocks = blocks;
      original.edits += 1;
      return answer(200, { ok: true });
    }
    if (body.response_type === 'in_channel') {
      addMessage({ channel: target.channel, ts: nextTs(), text, blocks, edits: 0 });
    } else {
      ephemerals.push({
        channel: target.channel,
        user: target.user,
        ts: nextTs(),
        text,
        blocks,
        via: 'response_url',
      });
    }
    return answer(200, { ok: true });
  }

  const server = createServer((req, res) => {
    void route(req, res).catch((error: unknown) => {
      problem('http', `the stand-in failed on ${req.url}: ${(error as Error).message}`);
      send(res, { status: 500, body: { ok: false, error: 'fatal_error' } });
    });
  });

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', base);
    // Slack times a trigger_id against the call's arrival, not against how long our own checks take.
    const arrivedAt = Date.now();
    const raw = await readBody(req);
    const api = url.pathname.match(/^\/api\/([a-zA-Z.]+)$/);
    if (api?.[1]) {
      const args = parseArgs(raw, req.headers['content-type'], url.searchParams);
      const answer = handleApi(api[1], args, req.headers.authorization, arrivedAt);
      // Slack names the token's scopes in every answer to a call made with one.
      if (answer.body.error !== 'not_authed' && answer.body.error !== 'invalid_auth')
        answer.headers = { ...answer.headers, 'x-oauth-scopes': scopes.join(',') };
      if (dateSkewMs !== 0)
        answer.headers = { ...answer.headers, date: new Date(Date.now() + dateSkewMs).toUTCString() };
      const holdMs = held.get(api[1])?.shift();
      if (holdMs !== undefined) await new Promise((resolve) => setTimeout(resolve, holdMs));
      if (!res.destroyed) send(res, answer);
      return;
    }
    const response = url.pathname.match(/^\/response\/([A-Za-z0-9]+)$/);
    if (response?.[1] && req.method === 'POST') {
      const args = parseArgs(raw, req.headers['content-type'], url.searchParams);
      return send(res, handleResponseUrl(response[1], args));
    }
    const upload = url.pathname.match(/^\/upload\/([A-Z0-9]+)$/);
    if (upload?.[1] && req.method === 'POST') {
      const entry = uploads.get(upload[1]);
      if (!entry) return send(res, { status: 404, body: { ok: false, error: 'file_not_found' } });
      if (raw.length !== entry.length)
        problem(
          'upload_url',
          `${raw.length} bytes uploaded for ${entry.id}, files.getUploadURLExternal was told ${entry.length}`,
        );
      entry.bytes = raw;
      res.writeHead(200, { 'content-type': 'text/plain' }).end(`OK - ${raw.length}`);
      return;
    }
    send(res, { status: 404, body: { ok: false, error: 'not_found' } });
  }

  server.on('upgrade', (req, socket, head) => socketMode.handleUpgrade(req, socket, head));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  base = `http://127.0.0.1:${port}`;

  return {
    apiUrl: `${base}/api/`,
    url: base,
    botToken,
    teamId,
    botUserId,
    socket: socketMode.standIn,
    calls,
    problems,
    views,
    responses,
    homes,
    files: () => [...uploads.values()],
    homeOf: (user) => homes.filter((h) => h.user === user).at(-1)?.view,
    startFunction(callbackId, inputs) {
      const execution: FunctionExecution = {
        id: nextId('Fx'),
        callbackId,
        token: `xwfp-${nextId('W')}-${Math.random().toString(36).slice(2)}`,
        inputs,
        state: 'running',
      };
      executions.set(execution.id, execution);
      return execution;
    },
    execution: (id) => executions.get(id),
    messages: (channel) =>
      messages.filter((m) => channel === undefined || m.channel === channel).map((m) => ({ ...m })),
    thread: (channel, ts) =>
      messages.filter((m) => m.channel === channel && m.thread_ts === ts).map((m) => ({ ...m })),
    threadReplyCount: () => threadReplyCount,
    ephemerals: (channel, user) =>
      ephemerals.filter(
        (m) => (channel === undefined || m.channel === channel) && (user === undefined || m.user === user),
      ),
    callsOf: (method) => calls.filter((c) => c.method === method),
    responseUrl(target) {
      const id = nextId('R').replace(/[^A-Za-z0-9]/g, '');
      responseUrls.set(id, { ...target, uses: 0 });
      return `${base}/response/${id}`;
    },
    triggerId() {
      const id = `${Date.now()}.${nextId('T')}`;
      triggers.set(id, { mintedAt: Date.now(), used: false });
      return id;
    },
    checkPayload,
    waitFor<T>(predicate: () => T | undefined | null | false, timeoutMs = 30_000): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        const check = () => {
          const value = predicate();
          if (value === undefined || value === null || value === false) return false;
          cleanup();
          resolve(value);
          return true;
        };
        // Some conditions change without a call reaching us (a timer in the bot), so poll as well.
        const poll = setInterval(check, 25);
        const timer = setTimeout(() => {
          cleanup();
          const last = calls
            .slice(-5)
            .map(
              (c) =>
                `${c.method}→${c.status}${c.response.ok === false ? ` ${String(c.response.error)}` : ''}`,
            );
          reject(
            new Error(`waitFor timed out after ${timeoutMs} ms; last calls: ${last.join(', ') || 'none'}`),
          );
        }, timeoutMs);
        const cleanup = () => {
          clearInterval(poll);
          clearTimeout(timer);
          events.off('call', check);
        };
        events.on('call', check);
        check();
      });
    },
    setUserGroup(id, members) {
      userGroups.set(id, members);
    },
    deactivateUser(user, value = true) {
      if (value) deactivated.add(user);
      else deactivated.delete(user);
    },
    holdAnswer(method, ms) {
      held.set(method, [...(held.get(method) ?? []), ms]);
    },
    leaveChannel(channel) {
      notMember.add(channel);
    },
    joinChannel(channel) {
      notMember.delete(channel);
    },
    failNext(method, fail = {}) {
      failures.set(method, [...(failures.get(method) ?? []), { ...fail, times: fail.times ?? 1 }]);
    },
    grantScopes(granted) {
      scopes = [...granted];
    },
    skewDate(ms) {
      dateSkewMs = ms;
    },
    limitPerChannel(limit) {
      perSecond = limit;
      sent.clear();
    },
    close() {
      socketMode.close();
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

/** The bot scopes the repository's manifest.yml asks for. */
function manifestScopes(): string[] {
  const manifest = parseYaml(readFileSync(join(SLACK_REFERENCE_DIR, '..', '..', 'manifest.yml'), 'utf8')) as {
    oauth_config?: { scopes?: { bot?: string[] } };
  };
  return manifest.oauth_config?.scopes?.bot ?? [];
}

/** The output parameters of the workflow steps the repository's manifest.steps.yml declares. */
function manifestOutputs(): FunctionOutputs {
  const manifest = parseYaml(
    readFileSync(join(SLACK_REFERENCE_DIR, '..', '..', 'manifest.steps.yml'), 'utf8'),
  ) as {
    functions?: Record<
      string,
      { output_parameters?: Record<string, { type: string; is_required?: boolean }> }
    >;
  };
  return Object.fromEntries(
    Object.entries(manifest.functions ?? {}).map(([id, fn]) => [
      id,
      Object.entries(fn.output_parameters ?? {}).map(([name, p]) => ({ name, ...p })),
    ]),
  );
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** Arguments from a JSON or form body (or the query string), with JSON-valued arguments parsed like Slack does. */
function parseArgs(
  raw: Buffer,
  contentType: string | undefined,
  query: URLSearchParams,
): Record<string, unknown> {
  const args: Record<string, unknown> = Object.fromEntries(query);
  const text = raw.toString('utf8');
  if (contentType?.includes('application/json')) {
    if (text.trim() !== '') {
      try {
        Object.assign(args, JSON.parse(text) as Record<string, unknown>);
      } catch {
        args.__body = new Error('invalid JSON body');
      }
    }
  } else if (text !== '') {
    Object.assign(args, Object.fromEntries(new URLSearchParams(text)));
  }
  for (const name of JSON_ARGS) {
    const value = args[name];
    if (typeof value !== 'string') continue;
    try {
      args[name] = JSON.parse(value);
    } catch {
      args[name] = new Error(`${name} is not JSON`);
    }
  }
  return args;
}

/** Slack's message metadata: `{ event_type, event_payload }`. */
function isMessageMetadata(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const { event_type, event_payload } = value as { event_type?: unknown; event_payload?: unknown };
  return typeof event_type === 'string' && typeof event_payload === 'object' && event_payload !== null;
}

function send(res: ServerResponse, answer: Answer): void {
  res.writeHead(answer.status, { 'content-type': 'application/json; charset=utf-8', ...answer.headers });
  res.end(JSON.stringify(answer.body));
}
