import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { type WebSocket, WebSocketServer } from 'ws';

/** The envelope types Slack sends an app over Socket Mode. */
export type EnvelopeType = 'slash_commands' | 'interactive' | 'events_api';

/** Why Slack asks the app to go: a routine refresh, a warning before it drops the link, or the app switched off. */
export type DisconnectReason = 'refresh_requested' | 'warning' | 'link_disabled';

/** One envelope as it travels on the socket. */
export interface Envelope {
  envelope_id: string;
  type: EnvelopeType;
  payload: Record<string, unknown>;
  accepts_response_payload: boolean;
  retry_attempt?: number;
  retry_reason?: string;
}

/** The app's answer to one envelope: `{envelope_id, payload}` on the socket. */
export interface SocketAck {
  envelopeId: string;
  /** The ack's payload, undefined when the app acked with nothing (`{}`). */
  payload: Record<string, unknown> | undefined;
  /** Milliseconds from sending the envelope to reading its ack. */
  ms: number;
  /** Which connection (1-based, in the order they were opened) carried it. */
  connection: number;
}

export interface DeliverOptions {
  /** Slack's retry counter; set with {@link SocketModeStandIn.redeliver}. */
  retryAttempt?: number;
  retryReason?: string;
  /** Keeps an envelope id (a redelivery); fresh by default. */
  envelopeId?: string;
  /** How long to wait for the ack (default the stand-in's `ackTimeoutMs`). */
  timeoutMs?: number;
}

/** How the stand-in checks what comes back in acks, and where it records what real Slack would refuse. */
export interface AckChecks {
  checkPayload(where: string, payload: { blocks?: unknown; view?: unknown }): string[];
  problem(where: string, why: string): void;
}

export interface SocketModeOptions {
  /** The only app-level token apps.connections.open accepts. */
  appToken: string;
  appId?: string;
  /** Slack pings every few seconds; the client drops a link that stays silent for 30 s. */
  pingIntervalMs?: number;
  /** How long a delivery waits for its ack before it rejects (default 5 s). */
  ackTimeoutMs?: number;
  /** How long a `wss` ticket from apps.connections.open stays valid (default 30 s). */
  ticketTtlMs?: number;
}

/** Slack's Socket Mode, as the app sees it from the other end of the WebSocket. */
export interface SocketModeStandIn {
  appToken: string;
  /** Connections opened (and greeted with `hello`) since the start. */
  readonly connections: number;
  /** Connections open now. */
  readonly open: number;
  /** Every envelope sent, redeliveries included, in order. */
  envelopes: Envelope[];
  /** Every ack read, in order. */
  acks: SocketAck[];
  /** Resolves once `count` connections have been opened in all and one is open; rejects after the timeout. */
  waitForConnection(count: number, timeoutMs?: number): Promise<void>;
  /** Resolves once no connection is open. */
  waitForNoConnection(timeoutMs?: number): Promise<void>;
  /** Sends an envelope on the newest open connection (waiting for one up to the timeout) and resolves with its ack. */
  deliver(type: EnvelopeType, payload: Record<string, unknown>, options?: DeliverOptions): Promise<SocketAck>;
  /** Sends an envelope again, as Slack does when it saw no ack: same id and payload, `retry_attempt` + 1. */
  redeliver(envelopeId: string, reason?: string): Promise<SocketAck>;
  /** Sends `disconnect` with `reason` on every open connection; closes them `closeAfterMs` later (default never). */
  disconnect(reason: DisconnectReason, closeAfterMs?: number): void;
  /** Drops every open connection without a close frame (a network loss). */
  drop(): void;
  /** The next `count` connection attempts are refused at the upgrade (HTTP 503). */
  refuseConnections(count: number): void;
  /** The next `count` connections open but get no `hello`. */
  withholdHello(count: number): void;
}

/** The pieces the HTTP stand-in wires in: the URL apps.connections.open answers and the upgrade handler. */
export interface SocketModeEndpoint {
  standIn: SocketModeStandIn;
  /** Mints a one-use `ws://…/link/?ticket=…` URL, as apps.connections.open answers. */
  openUrl(base: string): string;
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  close(): void;
}

interface Pending {
  envelope: Envelope;
  sentAt: number;
  connection: number;
  resolve(ack: SocketAck): void;
}

/**
 * A local stand-in of Slack's Socket Mode: hands out single-use tickets, greets each connection with `hello`, sends
 * `slash_commands`, `interactive` and `events_api` envelopes, reads acks by `envelope_id` and checks their
 * payloads (Block Kit, and that `response_action: errors` names input blocks of the submitted view).
 */
export function createSocketMode(options: SocketModeOptions, checks: AckChecks): SocketModeEndpoint {
  const appId = options.appId ?? 'A0CLOUDOPS';
  const ackTimeoutMs = options.ackTimeoutMs ?? 5000;
  const ticketTtlMs = options.ticketTtlMs ?? 30_000;
  const server = new WebSocketServer({ noServer: true });
  const tickets = new Map<string, number>();
  const sockets = new Map<WebSocket, number>();
  const pending = new Map<string, Pending>();
  const waiters = new Set<() => void>();
  const envelopes: Envelope[] = [];
  const acks: SocketAck[] = [];
  let opened = 0;
  let refuse = 0;
  let silent = 0;

  const changed = () => {
    for (const waiter of [...waiters]) waiter();
  };
  const until = (what: string, done: () => boolean, timeoutMs: number) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (!done()) return;
        cleanup();
        resolve();
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`socket stand-in: ${what} not within ${timeoutMs} ms (${opened} opened)`));
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        waiters.delete(check);
      };
      waiters.add(check);
      check();
    });
  const newest = (): [WebSocket, number] | undefined =>
    [...sockets].filter(([ws]) => ws.readyState === ws.OPEN).at(-1);

  function onAck(raw: string, connection: number): void {
    let message: { envelope_id?: unknown; payload?: unknown };
    try {
      message = JSON.parse(raw) as typeof message;
    } catch {
      checks.problem('socket', 'the app sent a message that is not JSON');
      return;
    }
    const id = typeof message.envelope_id === 'string' ? message.envelope_id : undefined;
    const entry = id ? pending.get(id) : undefined;
    if (!id || !entry) {
      checks.problem('socket', `an ack for an unknown or already acked envelope (${String(id)})`);
      return;
    }
    pending.delete(id);
    // Timed before the stand-in's own checks, which real Slack would not spend.
    const ms = performance.now() - entry.sentAt;
    const body =
      typeof message.payload === 'object' && message.payload !== null
        ? (message.payload as Record<string, unknown>)
        : undefined;
    const payload = body && Object.keys(body).length > 0 ? body : undefined;
    if (payload) checkAckPayload(entry.envelope, payload);
    const ack = { envelopeId: id, payload, ms, connection };
    acks.push(ack);
    entry.resolve(ack);
  }

  function checkAckPayload(envelope: Envelope, payload: Record<string, unknown>): void {
    if (!envelope.accepts_response_payload) {
      checks.problem('ack', `a payload in the ack of an envelope that accepts none (${envelope.type})`);
      return;
    }
    checks.checkPayload('ack', { blocks: payload.blocks, view: payload.view });
    if (payload.response_action === 'errors') {
      const view = envelope.payload.view as { blocks?: { type?: string; block_id?: string }[] } | undefined;
      const inputs = new Set((view?.blocks ?? []).filter((b) => b.type === 'input').map((b) => b.block_id));
      const errors = payload.errors;
      if (typeof errors !== 'object' || errors === null || Object.keys(errors).length === 0) {
        checks.problem('ack', '`response_action: errors` without `errors`');
        return;
      }
      for (const [block, text] of Object.entries(errors)) {
        if (!inputs.has(block))
          checks.problem('ack', `an error for \`${block}\`, not an input block of the view`);
        if (typeof text !== 'string' || text === '')
          checks.problem('ack', `the error for \`${block}\` is no text`);
      }
    }
  }

  server.on('connection', (ws: WebSocket) => {
    opened += 1;
    const connection = opened;
    sockets.set(ws, connection);
    ws.on('message', (data, isBinary) => {
      if (isBinary) checks.problem('socket', 'a binary message from the app');
      else onAck(data.toString(), connection);
    });
    ws.on('close', () => {
      clearInterval(ping);
      sockets.delete(ws);
      changed();
    });
    ws.on('error', () => undefined);
    const ping = setInterval(() => ws.ping(), options.pingIntervalMs ?? 5000);
    if (silent > 0) {
      silent -= 1;
    } else {
      ws.send(
        JSON.stringify({
          type: 'hello',
          num_connections: sockets.size,
          debug_info: { host: 'applink-standin', build_number: 1, approximate_connection_time: 18060 },
          connection_info: { app_id: appId },
        }),
      );
    }
    changed();
  });

  function send(envelope: Envelope, timeoutMs: number): Promise<SocketAck> {
    return new Promise<SocketAck>((resolve, reject) => {
      const timer = setTimeout(() => {
        pending.delete(envelope.envelope_id);
        reject(
          new Error(
            `socket stand-in: no ack for ${envelope.type} ${envelope.envelope_id} within ${timeoutMs} ms`,
          ),
        );
      }, timeoutMs);
      void until('an open connection', () => newest() !== undefined, timeoutMs).then(
        () => {
          const [ws, connection] = newest() ?? [];
          if (!ws || connection === undefined) return;
          pending.set(envelope.envelope_id, {
            envelope,
            sentAt: performance.now(),
            connection,
            resolve: (ack) => {
              clearTimeout(timer);
              resolve(ack);
            },
          });
          envelopes.push(envelope);
          ws.send(JSON.stringify(envelope));
        },
        () => undefined,
      );
    });
  }

  const standIn: SocketModeStandIn = {
    appToken: options.appToken,
    get connections() {
      return opened;
    },
    get open() {
      return [...sockets.keys()].filter((ws) => ws.readyState === ws.OPEN).length;
    },
    envelopes,
    acks,
    waitForConnection(count, timeoutMs = 10_000) {
      return until(`connection ${count}`, () => opened >= count && newest() !== undefined, timeoutMs);
    },
    waitForNoConnection(timeoutMs = 10_000) {
      return until('no open connection', () => sockets.size === 0, timeoutMs);
    },
    deliver(type, payload, deliver = {}) {
      const envelope: Envelope = {
        envelope_id: deliver.envelopeId ?? randomBytes(16).toString('hex'),
        type,
        payload,
        // Slack takes a response payload from commands and view submissions, not from button clicks or events.
        accepts_response_payload:
          type === 'slash_commands' || (type === 'interactive' && payload.type === 'view_submission'),
      };
      if (type === 'events_api' || deliver.retryAttempt !== undefined) {
        envelope.retry_attempt = deliver.retryAttempt ?? 0;
        envelope.retry_reason = deliver.retryReason ?? '';
      }
      return send(envelope, deliver.timeoutMs ?? ackTimeoutMs);
    },
    redeliver(envelopeId, reason = 'timeout') {
      const first = envelopes.find((e) => e.envelope_id === envelopeId);
      if (!first) return Promise.reject(new Error(`socket stand-in: no envelope ${envelopeId} was sent`));
      const attempts = envelopes.filter((e) => e.envelope_id === envelopeId).length;
      return send({ ...first, retry_attempt: attempts, retry_reason: reason }, ackTimeoutMs);
    },
    disconnect(reason, closeAfterMs) {
      for (const ws of sockets.keys()) {
        if (ws.readyState !== ws.OPEN) continue;
        ws.send(JSON.stringify({ type: 'disconnect', reason, debug_info: { host: 'applink-standin' } }));
        if (closeAfterMs !== undefined) setTimeout(() => ws.close(1001, reason), closeAfterMs).unref();
      }
    },
    drop() {
      for (const ws of sockets.keys()) ws.terminate();
    },
    refuseConnections(count) {
      refuse = count;
    },
    withholdHello(count) {
      silent = count;
    },
  };

  return {
    standIn,
    openUrl(base) {
      const ticket = randomBytes(12).toString('hex');
      tickets.set(ticket, Date.now());
      return `${base.replace(/^http/, 'ws')}/link/?ticket=${ticket}&app_id=${appId}`;
    },
    handleUpgrade(req, socket, head) {
      // A client that goes away mid-upgrade (a bot killed while connecting) must not crash the stand-in.
      socket.on('error', () => undefined);
      const url = new URL(req.url ?? '/', 'http://stand-in');
      const ticket = url.searchParams.get('ticket') ?? '';
      const mintedAt = tickets.get(ticket);
      tickets.delete(ticket);
      const refusal =
        url.pathname !== '/link/'
          ? '404 Not Found'
          : mintedAt === undefined || Date.now() - mintedAt > ticketTtlMs
            ? '401 Unauthorized'
            : refuse > 0
              ? '503 Service Unavailable'
              : undefined;
      if (refusal) {
        if (refusal.startsWith('503')) refuse -= 1;
        socket.end(`HTTP/1.1 ${refusal}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
        return;
      }
      server.handleUpgrade(req, socket, head, (ws) => server.emit('connection', ws, req));
    },
    close() {
      for (const ws of sockets.keys()) ws.terminate();
      server.close();
    },
  };
}
