/** Which simulator a sims-child.ts process serves: each runs in a process of its own. */
export type SimServed = 'cloud' | 'slack';

/** What the bench asks of a simulator's process (sims-child.ts), one operation per message. */
export type SimsOp =
  | {
      op: 'start';
      serve: SimServed;
      seedVms?: { count: number; firstVmid: number };
      extraClusters?: number;
      botToken: string;
      teamId: string;
    }
  | { op: 'responseUrl'; channel: string; user: string }
  | { op: 'limitPerChannel'; perSecond: number | null }
  | { op: 'cloudLatency'; route: 'resize'; latencyMs: number; times: number }
  | { op: 'slackSummary'; channelPrefix?: string }
  | { op: 'threadReplies' }
  | { op: 'cloudSummary' }
  | { op: 'resizeTimes'; sinceMs: number }
  | { op: 'replyTimes'; sinceMs: number }
  | { op: 'openedView'; triggerId: string; timeoutMs: number }
  | { op: 'sentView'; triggerId: string; timeoutMs: number }
  | { op: 'requestMessage'; vmid: number; timeoutMs: number };

/** A top-level message the bot posted about one VM's request, as the steady-load flow reads it to click Approve. */
export interface PostedMessage {
  channel: string;
  ts: string;
  text: string;
  blocks: unknown[];
}

/** What one simulator's process says once started: its address, and the cloud's key and seeded project. */
export type SimStarted = Partial<SimsStarted>;

/** The simulators' addresses once started. */
export interface SimsStarted {
  cloudUrl: string;
  cloudApiKey: string;
  slackApiUrl: string;
  projectUuid: string;
}

/** Counts from the Slack stand-in. */
export interface SlackSummary {
  callsByMethod: Record<string, number>;
  /** HTTP 429 answers (per-channel rate limit). */
  rateLimited: number;
  /** Calls answered ok:false, by error code. */
  failures: Record<string, number>;
  problems: number;
  firstProblems: string[];
  /** Top-level messages per channel (channels starting with `channelPrefix` when given). */
  topLevelPerChannel: Record<string, number>;
  /** Thread replies in all channels. */
  threadReplies: number;
  /** Time of the first and last successful chat.postMessage, ms since epoch. */
  firstPostAt?: number;
  lastPostAt?: number;
}

/** Counts from the cloud simulator. */
export interface CloudSummary {
  calls: number;
  applied: number;
  overlaps: number;
  /** Answers by status code for mutation calls. */
  resizeStatuses: Record<string, number>;
}

/** When the simulators received what (epoch ms, sub-millisecond), for click → API and click → reply latencies. */
export interface CallTimes {
  /** Resize calls to the cloud simulator: the VM and when the call arrived. */
  resizes: { vmid: number; atMs: number }[];
  /**
   * Thread replies (chat.postMessage with thread_ts) on the Slack stand-in: the parent ts, when answered, and whether
   * the reply is a run's result (done, refused or unknown) rather than a notice such as "Approved by …".
   */
  replies: { threadTs: string; atMs: number; result: boolean }[];
}
