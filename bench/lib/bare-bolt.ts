import type { Server } from 'node:http';
import { App, HTTPReceiver, LogLevel } from '@slack/bolt';
import { forkProc } from './proc.ts';

/** A bare Bolt app: same receiver and signature check as the bot, handlers that only ack. */
export interface BareBolt {
  url: string;
  close(): Promise<void>;
}

/** Starts the baseline on 127.0.0.1 (port 0); `/cloud` and `actionId` clicks are acked and nothing else. */
export async function startBareBolt(signingSecret: string, actionId: string): Promise<BareBolt> {
  const receiver = new HTTPReceiver({ signingSecret, endpoints: '/slack/events', logLevel: LogLevel.ERROR });
  const app = new App({
    token: 'xoxb-bench-baseline',
    receiver,
    logLevel: LogLevel.ERROR,
    // With the bot's ids given, Bolt never calls auth.test (the bot's own auth.test result is cached the same way).
    tokenVerificationEnabled: false,
    botId: 'B0BARE',
    botUserId: 'U0BARE',
  });
  app.command('/cloud', async ({ ack }) => {
    await ack();
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
export async function startBareBoltProc(signingSecret: string, actionId: string): Promise<BareBoltProc> {
  const proc = forkProc(new URL('./bare-bolt-child.ts', import.meta.url), 'bare Bolt');
  try {
    const url = await proc.call<string>({ op: 'start', signingSecret, actionId });
    return { url, cpuMs: () => proc.cpuMs(), close: () => proc.close() };
  } catch (error) {
    await proc.close(1000);
    throw error;
  }
}
