import type { App, Receiver, ReceiverEvent } from '@slack/bolt';
import { SocketModeClient } from '@slack/socket-mode';
import { ErrorCode } from '@slack/web-api';
import type { Dispatcher } from 'undici';
import { outboundDispatcher, type ProxyEnv, proxyConfigured } from '../config/outbound.ts';
import type { Logger } from '../observability/logger.ts';
import { TOKEN_REFUSED } from '../slack-api/errors.ts';
import { boltLogger } from './bolt-logger.ts';
import type { RedeliveryGuard } from './redelivery.ts';

/** How the link waits between attempts to connect: doubling from `firstMs` up to `maxMs`, with some jitter. */
export interface ReconnectPolicy {
  firstMs: number;
  maxMs: number;
  /** How long an opened socket may take to say `hello` before the attempt counts as failed. */
  helloTimeoutMs: number;
  /** How long apps.connections.open may take. */
  openTimeoutMs: number;
}

/** Production: 1 s, 2 s, 4 s … 30 s between failed attempts; the first attempt after a loss goes at once. */
export const RECONNECT_POLICY: ReconnectPolicy = {
  firstMs: 1000,
  maxMs: 30_000,
  helloTimeoutMs: 10_000,
  openTimeoutMs: 5000,
};

/** Slack refused the app-level token (or its type): no reconnect will cure that. */
export class SocketLinkRefusedError extends Error {
  override readonly name = 'SocketLinkRefusedError';
  readonly code = 'SOCKET_LINK_REFUSED';
}

export interface SocketLinkOptions {
  appToken: string;
  /** Base of the Web API, where apps.connections.open is asked (SLACK_API_URL). */
  apiUrl: string;
  logger: Logger;
  /** The outbound proxy for apps.connections.open and the WebSocket (docs/configuration.md#outbound-proxy). */
  proxy?: ProxyEnv;
  /** Deliveries seen before get the answer they got then and are not acted on; without a guard all are processed. */
  guard?: RedeliveryGuard;
  policy?: ReconnectPolicy;
  /** Told when the link comes up or goes down (readiness, metrics). */
  onState?(connected: boolean): void;
}

/** The wait before attempt `failures + 1`, after `failures` failed attempts in a row (0: at once). */
export function reconnectDelay(failures: number, policy: ReconnectPolicy, random = Math.random): number {
  if (failures <= 0) return 0;
  const base = Math.min(policy.maxMs, policy.firstMs * 2 ** (failures - 1));
  // ±20 % so that several bots dropped together do not come back in step.
  return Math.round(base * (0.8 + 0.4 * random()));
}

/**
 * Bolt's receiver for Socket Mode, with the reconnect in our hands: `@slack/socket-mode` waits 5 s × attempts
 * (unbounded) and hides the state, so its own reconnect is off. `start()` resolves on the first `hello` and rejects
 * when Slack refuses the token; a lost link (a `disconnect` message, a dropped socket, a silent peer) is reopened at
 * once, then after 1 s, 2 s … 30 s. Deliveries seen before (Slack's `retry_attempt`) are acked and not acted on.
 */
export class SocketLink implements Receiver {
  private app?: App;
  private client?: SocketModeClient;
  private readonly policy: ReconnectPolicy;
  private readonly logger: Logger;
  private stopping = false;
  private up = false;
  private failures = 0;
  private timer?: NodeJS.Timeout;
  private wake?: () => void;
  private running?: Promise<void>;
  /** Only with a proxy: socket-mode's own default closes a stalled socket faster than a passed-in dispatcher can. */
  private dispatcher?: Dispatcher;

  constructor(private readonly options: SocketLinkOptions) {
    this.policy = options.policy ?? RECONNECT_POLICY;
    this.logger = options.logger.child({ component: 'socket-mode' });
  }

  init(app: App): void {
    this.app = app;
  }

  /** Whether the link is up (`hello` received and not lost since). */
  get connected(): boolean {
    return this.up;
  }

  /** Connects, retrying with backoff until connected; rejects with {@link SocketLinkRefusedError} or when stopped. */
  async start(): Promise<void> {
    this.stopping = false;
    await this.connectUntilUp();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.timer);
    this.wake?.();
    const client = this.client;
    this.client = undefined;
    this.setUp(false);
    if (client) await client.disconnect();
    const dispatcher = this.dispatcher;
    this.dispatcher = undefined;
    await dispatcher?.close().catch(() => undefined);
  }

  private setUp(connected: boolean): void {
    if (this.up === connected) return;
    this.up = connected;
    this.options.onState?.(connected);
  }

  private async connectUntilUp(): Promise<void> {
    for (;;) {
      if (this.stopping) throw new Error('the Socket Mode link was stopped');
      try {
        await this.connectOnce();
        this.logger.info({ failedAttempts: this.failures }, 'Socket Mode connected');
        this.failures = 0;
        return;
      } catch (error) {
        if (error instanceof SocketLinkRefusedError || this.stopping) throw error;
        this.failures += 1;
        const wait = reconnectDelay(this.failures, this.policy);
        // The first failure of a run is worth a line; the next ones are counted in the 'connected' line.
        this.logger[this.failures === 1 ? 'warn' : 'debug'](
          { err: error, attempt: this.failures, retryInMs: wait },
          'Socket Mode connection failed; retrying',
        );
        await this.sleep(wait);
      }
    }
  }

  /** The proxy's dispatcher for the client, opened on first use (again after a stop); nothing without a proxy. */
  private throughProxy(): { dispatcher?: Dispatcher } {
    const proxy = this.options.proxy;
    if (!proxy || !proxyConfigured(proxy)) return {};
    this.dispatcher ??= outboundDispatcher(proxy);
    return { dispatcher: this.dispatcher };
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
      this.timer = setTimeout(resolve, ms);
    });
  }

  /** One attempt: apps.connections.open, the socket, `hello`. Rejects on any failure, having closed what it opened. */
  private async connectOnce(): Promise<void> {
    const quiet = boltLogger(this.logger);
    const client = new SocketModeClient({
      appToken: this.options.appToken,
      // Payloads would reach the log at debug level: the client's debug lines are dropped. Its errors and warnings
      // are about one attempt, which the link retries and reports itself (one line per outage): debug.
      logger: { ...quiet, debug: () => undefined, warn: quiet.debug, error: quiet.debug },
      autoReconnectEnabled: false,
      ...this.throughProxy(),
      clientOptions: {
        slackApiUrl: this.options.apiUrl,
        retryConfig: { retries: 0 },
        rejectRateLimitedCalls: true,
        timeout: this.policy.openTimeoutMs,
      },
    });
    client.on('slack_event', (args: SlackEventArgs) => void this.onEvent(args));
    let hello: NodeJS.Timeout | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        hello = setTimeout(
          () => reject(new Error(`no hello within ${this.policy.helloTimeoutMs} ms`)),
          this.policy.helloTimeoutMs,
        );
        client.start().then(() => resolve(), reject);
      });
    } catch (error) {
      void client.disconnect().catch(() => undefined);
      throw refusal(error) ?? error ?? new Error('the socket closed before hello');
    } finally {
      clearTimeout(hello);
    }
    if (this.stopping) {
      await client.disconnect();
      throw new Error('the Socket Mode link was stopped');
    }
    this.client = client;
    // Registered after `hello`: the disconnect of a failed attempt is not a loss.
    client.once('disconnected', () => this.onLost(client));
    this.setUp(true);
  }

  private onLost(client: SocketModeClient): void {
    if (this.client !== client || this.stopping) return;
    this.client = undefined;
    this.setUp(false);
    this.logger.warn('Socket Mode connection lost; reconnecting');
    this.running ??= this.connectUntilUp()
      .catch((error: unknown) => {
        if (!this.stopping) this.logger.error({ err: error }, 'Socket Mode cannot reconnect');
      })
      .finally(() => {
        this.running = undefined;
      });
  }

  private async onEvent(args: SlackEventArgs): Promise<void> {
    const guard = this.options.guard;
    let acked = false;
    const ack = async (response?: unknown) => {
      if (acked) return;
      acked = true;
      const answer = response as Record<string, unknown> | undefined;
      // Kept before it is sent: should this ack be lost with the socket, Slack's next delivery gets it again.
      if (guard && answer && Object.keys(answer).length > 0)
        void guard
          .remember(args.body, answer)
          .catch((error: unknown) =>
            this.logger.warn({ err: error }, 'the redelivery guard could not keep an answer'),
          );
      await args.ack(answer);
    };
    if (guard) {
      const delivery = await guard.check(args.body).catch((error: unknown) => {
        // Without Redis the handlers fail anyway; they say so to the user.
        this.logger.warn({ err: error }, 'the redelivery guard could not ask Redis');
        return { first: true } as const;
      });
      if (!delivery.first) {
        this.logger.info(
          { type: args.type, retryNum: args.retry_num, retryReason: args.retry_reason },
          'a delivery seen before was answered as before and not acted on again',
        );
        await args.ack(delivery.answer).catch(() => undefined);
        return;
      }
    }
    const event: ReceiverEvent = {
      body: args.body,
      ack,
      retryNum: args.retry_num,
      retryReason: args.retry_reason,
    };
    try {
      await this.app?.processEvent(event);
    } catch (error) {
      this.logger.error({ err: error, type: args.type }, 'a Socket Mode delivery failed');
    }
  }
}

interface SlackEventArgs {
  ack(response?: Record<string, unknown>): Promise<void>;
  type: string;
  body: Record<string, unknown>;
  retry_num?: number;
  retry_reason?: string;
}

/** A refusal no retry will cure: the app-level token refused, or a bot token given in its place. */
function refusal(error: unknown): SocketLinkRefusedError | undefined {
  const { code, data } = (error ?? {}) as { code?: string; data?: { error?: string } };
  if (code !== ErrorCode.PlatformError || !data?.error) return undefined;
  if (TOKEN_REFUSED.has(data.error) || data.error === 'not_allowed_token_type')
    return new SocketLinkRefusedError(`SLACK_APP_TOKEN: Slack refused the app-level token (${data.error})`);
  return undefined;
}
