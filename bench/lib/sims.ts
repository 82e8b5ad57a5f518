import { type ChildProcess, fork } from 'node:child_process';
import type {
  CallTimes,
  CloudSummary,
  SimsOp,
  SimsReply,
  SimsStarted,
  SlackSummary,
} from './sims-protocol.ts';

/** The simulators' process, driven over IPC. */
export interface Sims extends SimsStarted {
  responseUrl(channel: string, user: string): Promise<string>;
  limitPerChannel(perSecond: number | null): Promise<void>;
  cloudLatency(latencyMs: number, times: number): Promise<void>;
  slackSummary(channelPrefix?: string): Promise<SlackSummary>;
  cloudSummary(): Promise<CloudSummary>;
  /** Resize calls and thread replies received since `sinceMs` (epoch ms). */
  callTimes(sinceMs: number): Promise<CallTimes>;
  close(): Promise<void>;
}

/** No simulator operation takes longer than this; a longer one means the child is stuck. */
const OP_TIMEOUT_MS = 60_000;

/** Forks sims-child.ts and starts the cloud simulator (with `seedVms` extra VMs) and the Slack stand-in in it. */
export async function startSims(options: {
  botToken: string;
  teamId: string;
  seedVms?: { count: number; firstVmid: number };
  /** Zones added to the default seed's. */
  extraClusters?: number;
}): Promise<Sims> {
  const child: ChildProcess = fork(new URL('./sims-child.ts', import.meta.url), {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let nextId = 1;
  const waiting = new Map<number, (reply: SimsReply) => void>();
  child.on('message', (reply: SimsReply) => {
    waiting.get(reply.id)?.(reply);
    waiting.delete(reply.id);
  });
  child.on('exit', (code) => {
    for (const w of waiting.values()) w({ id: 0, ok: false, error: `simulators exited (code ${code})` });
    waiting.clear();
  });
  const call = <T>(op: SimsOp): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error(`simulators: ${op.op} did not answer within ${OP_TIMEOUT_MS} ms`));
      }, OP_TIMEOUT_MS);
      waiting.set(id, (reply) => {
        clearTimeout(timer);
        if (reply.ok) resolve(reply.value as T);
        else reject(new Error(`simulators: ${op.op}: ${reply.error}`));
      });
      child.send({ ...op, id });
    });
  const kill = () => {
    if (child.exitCode === null) child.kill('SIGKILL');
  };
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
    kill();
    throw error;
  }
  return {
    ...started,
    responseUrl: (channel, user) => call<string>({ op: 'responseUrl', channel, user }),
    limitPerChannel: async (perSecond) => void (await call({ op: 'limitPerChannel', perSecond })),
    cloudLatency: async (latencyMs, times) =>
      void (await call({ op: 'cloudLatency', route: 'resize', latencyMs, times })),
    slackSummary: (channelPrefix) => call<SlackSummary>({ op: 'slackSummary', channelPrefix }),
    cloudSummary: () => call<CloudSummary>({ op: 'cloudSummary' }),
    callTimes: (sinceMs) => call<CallTimes>({ op: 'callTimes', sinceMs }),
    async close() {
      if (child.exitCode !== null) return;
      await call({ op: 'close' }).catch(() => undefined);
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.disconnect();
      const timer = setTimeout(kill, 3000);
      await exited;
      clearTimeout(timer);
    },
  };
}
