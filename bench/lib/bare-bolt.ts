import type { Server } from 'node:http';
import { App, HTTPReceiver, LogLevel } from '@slack/bolt';
import type { ModalView } from '@slack/types';
import { forkProc } from './proc.ts';

/** A bare Bolt app: same receiver and signature check as the bot, handlers that ack (and, given a modal, open it). */
export interface BareBolt {
  url: string;
  close(): Promise<void>;
}

/** A modal the baseline opens for each `/cloud` command, with Bolt's own client, on the Slack stand-in. */
export interface BareModal {
  slackApiUrl: string;
  token: string;
  /** The view, as the bot sends it for the same command. */
  view: unknown;
}

/**
 * Starts the baseline on 127.0.0.1 (port 0). `actionId` clicks are acked and nothing else; `/cloud` is acked and,
 * with `modal`, answered by opening that modal (what the bot's `/cloud resize` does), else acked alone.
 */
export async function startBareBolt(
  signingSecret: string,
  actionId: string,
  modal?: BareModal,
): Promise<BareBolt> {
  const receiver = new HTTPReceiver({ signingSecret, endpoints: '/slack/events', logLevel: LogLevel.ERROR });
  const app = new App({
    token: modal?.token ?? 'xoxb-bench-baseline',
    receiver,
    logLevel: LogLevel.ERROR,
    ...(modal ? { clientOptions: { slackApiUrl: modal.slackApiUrl } } : {}),
    // With the bot's ids given, Bolt never calls auth.test (the bot's own auth.test result is cached the same way).
    tokenVerificationEnabled: false,
    botId: 'B0BARE',
    botUserId: 'U0BARE',
  });
  app.command('/cloud', async ({ ack, body, client }) => {
    await ack();
    if (modal) await client.views.open({ trigger_id: body.trigger_id, view: modal.view as ModalView });
  });
  app.action(actionId, async ({ ack }) => {
    await ack();
  });
  const server = (await receiver.start({ port: 0, host: '127.0.0.1' })) as Server;
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}/slack/events`,
    async close() {
      await receiver.stop();
    },
  };
}

/** The bare Bolt baseline in a process of its own, with that process's CPU time. */
export interface BareBoltProc extends BareBolt {
  cpuMs(): Promise<number>;
}

/** Forks bare-bolt-child.ts and starts {@link startBareBolt} in it. */
export async function startBareBoltProc(
  signingSecret: string,
  actionId: string,
  modal?: BareModal,
): Promise<BareBoltProc> {
  const proc = forkProc(new URL('./bare-bolt-child.ts', import.meta.url), 'bare Bolt');
  try {
    const url = await proc.call<string>({ op: 'start', signingSecret, actionId, modal });
    return { url, cpuMs: () => proc.cpuMs(), close: () => proc.close() };
  } catch (error) {
    await proc.close(1000);
    throw error;
  }
}
