import { forkProc } from './proc.ts';
import type {
  CallTimes,
  CloudSummary,
  PostedMessage,
  SimServed,
  SimStarted,
  SimsOp,
  SimsStarted,
  SlackSummary,
} from './sims-protocol.ts';

/** The simulators' processes, driven over IPC. */
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

/**
 * Forks sims-child.ts twice, the cloud simulator (with `seedVms` extra VMs) in one process and the Slack stand-in in
 * the other: the bot calls both at the same moments (a run's POST beside the approval's notice), and the real
 * services are not one process either.
 */
export async function startSims(options: {
  botToken: string;
  teamId: string;
  seedVms?: { count: number; firstVmid: number };
  /** Zones added to the default seed's. */
  extraClusters?: number;
}): Promise<Sims> {
  const procs = {
    cloud: forkProc(new URL('./sims-child.ts', import.meta.url), 'cloud simulator'),
    slack: forkProc(new URL('./sims-child.ts', import.meta.url), 'Slack stand-in'),
  };
  const call =
    (serve: SimServed) =>
    <T>(op: SimsOp): Promise<T> =>
      procs[serve].call<T>({ op: 'run', message: op });
  const cloud = call('cloud');
  const slack = call('slack');
  const closeAll = async (ms: number) =>
    void (await Promise.all([procs.cloud.close(ms), procs.slack.close(ms)]));
  let started: SimsStarted;
  try {
    const start = (serve: SimServed) =>
      call(serve)<SimStarted>({
        op: 'start',
        serve,
        botToken: options.botToken,
        teamId: options.teamId,
        seedVms: options.seedVms,
        extraClusters: options.extraClusters,
      });
    const [ofCloud, ofSlack] = await Promise.all([start('cloud'), start('slack')]);
    started = {
      cloudUrl: need(ofCloud.cloudUrl),
      cloudApiKey: need(ofCloud.cloudApiKey),
      projectUuid: need(ofCloud.projectUuid),
      slackApiUrl: need(ofSlack.slackApiUrl),
    };
  } catch (error) {
    await closeAll(1000);
    throw error;
  }
  return {
    ...started,
    responseUrl: (channel, user) => slack<string>({ op: 'responseUrl', channel, user }),
    limitPerChannel: async (perSecond) => void (await slack({ op: 'limitPerChannel', perSecond })),
    cloudLatency: async (latencyMs, times) =>
      void (await cloud({ op: 'cloudLatency', route: 'resize', latencyMs, times })),
    slackSummary: (channelPrefix) => slack<SlackSummary>({ op: 'slackSummary', channelPrefix }),
    threadReplies: () => slack<number>({ op: 'threadReplies' }),
    cloudSummary: () => cloud<CloudSummary>({ op: 'cloudSummary' }),
    callTimes: async (sinceMs) => {
      const [resizes, replies] = await Promise.all([
        cloud<CallTimes['resizes']>({ op: 'resizeTimes', sinceMs }),
        slack<CallTimes['replies']>({ op: 'replyTimes', sinceMs }),
      ]);
      return { resizes, replies };
    },
    openedView: (triggerId, timeoutMs) =>
      slack<Record<string, unknown>>({ op: 'openedView', triggerId, timeoutMs }),
    sentView: (triggerId, timeoutMs) => slack<unknown>({ op: 'sentView', triggerId, timeoutMs }),
    requestMessage: (vmid, timeoutMs) => slack<PostedMessage>({ op: 'requestMessage', vmid, timeoutMs }),
    close: () => closeAll(5000),
  };
}

function need(value: string | undefined): string {
  if (value === undefined) throw new Error('a simulator started without saying where it listens');
  return value;
}
