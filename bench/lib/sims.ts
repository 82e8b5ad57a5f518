import { forkProc } from './proc.ts';
import type {
  CallTimes,
  CloudSummary,
  PostedMessage,
  SimsOp,
  SimsStarted,
  SlackSummary,
} from './sims-protocol.ts';

/** The simulators' process, driven over IPC. */
export interface Sims extends SimsStarted {
  responseUrl(channel: string, user: string): Promise<string>;
  limitPerChannel(perSecond: number | null): Promise<void>;
  cloudLatency(latencyMs: number, times: number): Promise<void>;
  slackSummary(channelPrefix?: string): Promise<SlackSummary>;
  /** Thread replies posted so far (a counter: cheap to poll, however many messages the stand-in holds). */
  threadReplies(): Promise<number>;
  cloudSummary(): Promise<CloudSummary>;
  /** Resize calls and thread replies received since `sinceMs` (epoch ms). */
  callTimes(sinceMs: number): Promise<CallTimes>;
  /** The view views.open set for `triggerId`, once it came (rejects after `timeoutMs`). */
  openedView(triggerId: string, timeoutMs: number): Promise<Record<string, unknown>>;
  /** The view the bot sent to views.open for that trigger, as it sent it. */
  sentView(triggerId: string, timeoutMs: number): Promise<unknown>;
  /** The last top-level message posted about VM `vmid` (its text says `VM <vmid>`), once it came. */
  requestMessage(vmid: number, timeoutMs: number): Promise<PostedMessage>;
  close(): Promise<void>;
}

/** Forks sims-child.ts and starts the cloud simulator (with `seedVms` extra VMs) and the Slack stand-in in it. */
export async function startSims(options: {
  botToken: string;
  teamId: string;
  seedVms?: { count: number; firstVmid: number };
  /** Zones added to the default seed's. */
  extraClusters?: number;
}): Promise<Sims> {
  const proc = forkProc(new URL('./sims-child.ts', import.meta.url), 'simulators');
  const call = <T>(op: SimsOp): Promise<T> => proc.call<T>({ op: 'run', message: op });
  let started: SimsStarted;
  try {
    started = await call<SimsStarted>({
      op: 'start',
      botToken: options.botToken,
      teamId: options.teamId,
      seedVms: options.seedVms,
      extraClusters: options.extraClusters,
    });
  } catch (error) {
    await proc.close(1000);
    throw error;
  }
  return {
    ...started,
    responseUrl: (channel, user) => call<string>({ op: 'responseUrl', channel, user }),
    limitPerChannel: async (perSecond) => void (await call({ op: 'limitPerChannel', perSecond })),
    cloudLatency: async (latencyMs, times) =>
      void (await call({ op: 'cloudLatency', route: 'resize', latencyMs, times })),
    slackSummary: (channelPrefix) => call<SlackSummary>({ op: 'slackSummary', channelPrefix }),
    threadReplies: () => call<number>({ op: 'threadReplies' }),
    cloudSummary: () => call<CloudSummary>({ op: 'cloudSummary' }),
    callTimes: (sinceMs) => call<CallTimes>({ op: 'callTimes', sinceMs }),
    openedView: (triggerId, timeoutMs) =>
      call<Record<string, unknown>>({ op: 'openedView', triggerId, timeoutMs }),
    sentView: (triggerId, timeoutMs) => call<unknown>({ op: 'sentView', triggerId, timeoutMs }),
    requestMessage: (vmid, timeoutMs) => call<PostedMessage>({ op: 'requestMessage', vmid, timeoutMs }),
    close: () => proc.close(5000),
  };
}
