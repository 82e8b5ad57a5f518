import { serveProc } from './proc.ts';
import type {
  CallTimes,
  CloudSummary,
  PostedMessage,
  SimStarted,
  SimsOp,
  SlackSummary,
} from './sims-protocol.ts';

/**
 * The cloud simulator or the Slack stand-in in a process of its own (sims.ts forks one of each), so their work
 * (schema checks, bookkeeping) runs neither on the bot's event loop nor on the other's: the cloud API's arrival
 * stamps do not wait behind the Slack stand-in's checks of messages posted at the same moment.
 */
type CloudSim = Awaited<ReturnType<typeof import('../../sim/cloud/server.ts')['startCloudSim']>>;
type StandIn = Awaited<ReturnType<typeof import('../../sim/slack/server.ts')['startSlackStandIn']>>;

let cloud: CloudSim | undefined;
let slack: StandIn | undefined;

function need<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`${what} is not started`);
  return value;
}

async function perform(message: SimsOp): Promise<unknown> {
  switch (message.op) {
    case 'start': {
      if (message.serve === 'slack') {
        const { startSlackStandIn } = await import('../../sim/slack/server.ts');
        slack = await startSlackStandIn({ port: 0, botToken: message.botToken, teamId: message.teamId });
        return { slackApiUrl: slack.apiUrl } satisfies SimStarted;
      }
      const { startCloudSim, DEFAULT_SEED } = await import('../../sim/cloud/server.ts');
      const { benchSeed } = await import('./seed.ts');
      const seeded = benchSeed(DEFAULT_SEED, message.seedVms, message.extraClusters);
      cloud = await startCloudSim({ port: 0, seed: seeded.seed });
      return {
        cloudUrl: cloud.url,
        cloudApiKey: cloud.apiKey,
        projectUuid: seeded.projectUuid,
      } satisfies SimStarted;
    }
    case 'responseUrl':
      return need(slack, 'the Slack stand-in').responseUrl({ channel: message.channel, user: message.user });
    case 'limitPerChannel':
      need(slack, 'the Slack stand-in').limitPerChannel(message.perSecond ?? undefined);
      return null;
    case 'cloudLatency':
      need(cloud, 'the cloud simulator').fault(message.route, {
        kind: 'latency',
        ms: message.latencyMs,
        times: message.times,
      });
      return null;
    case 'slackSummary':
      return slackSummary(need(slack, 'the Slack stand-in'), message.channelPrefix);
    case 'threadReplies':
      return need(slack, 'the Slack stand-in').threadReplyCount();
    case 'cloudSummary':
      return cloudSummary(need(cloud, 'the cloud simulator'));
    case 'openedView': {
      const standIn = need(slack, 'the Slack stand-in');
      return standIn.waitFor(() => flowIndex(standIn).views.get(message.triggerId), message.timeoutMs);
    }
    case 'sentView': {
      const standIn = need(slack, 'the Slack stand-in');
      return standIn.waitFor(() => flowIndex(standIn).sent.get(message.triggerId), message.timeoutMs);
    }
    case 'requestMessage': {
      const standIn = need(slack, 'the Slack stand-in');
      return standIn.waitFor(() => flowIndex(standIn).messages.get(message.vmid), message.timeoutMs);
    }
    case 'resizeTimes':
      return resizeTimes(need(cloud, 'the cloud simulator'), message.sinceMs);
    case 'replyTimes':
      return replyTimes(need(slack, 'the Slack stand-in'), message.sinceMs);
  }
}

/** Views by trigger_id and request messages by VM id, indexed as calls arrive (each call read once, not per wait). */
const flows = {
  calls: 0,
  views: new Map<string, Record<string, unknown>>(),
  /** The views as the bot sent them to views.open (what the stand-in answered is in `views`). */
  sent: new Map<string, unknown>(),
  messages: new Map<number, PostedMessage>(),
};

function flowIndex(standIn: StandIn): typeof flows {
  for (; flows.calls < standIn.calls.length; flows.calls++) {
    const call = standIn.calls[flows.calls];
    if (call?.response.ok !== true) continue;
    if (call.method === 'views.open' && typeof call.args.trigger_id === 'string') {
      flows.views.set(call.args.trigger_id, call.response.view as Record<string, unknown>);
      flows.sent.set(call.args.trigger_id, call.args.view);
    } else if (call.method === 'chat.postMessage' && call.args.thread_ts === undefined) {
      const text = typeof call.args.text === 'string' ? call.args.text : '';
      const vmid = Number(/\bVM (\d+)\b/.exec(text)?.[1]);
      if (Number.isInteger(vmid))
        flows.messages.set(vmid, {
          channel: String(call.response.channel ?? call.args.channel),
          ts: String(call.response.ts),
          text,
          blocks: Array.isArray(call.args.blocks) ? call.args.blocks : [],
        });
    }
  }
  return flows;
}

function slackSummary(standIn: StandIn, channelPrefix?: string): SlackSummary {
  const callsByMethod: Record<string, number> = {};
  const failures: Record<string, number> = {};
  let rateLimited = 0;
  let firstPostAt: number | undefined;
  let lastPostAt: number | undefined;
  for (const call of standIn.calls) {
    callsByMethod[call.method] = (callsByMethod[call.method] ?? 0) + 1;
    if (call.status === 429) rateLimited++;
    else if (call.response.ok === false) {
      const code = String(call.response.error);
      failures[code] = (failures[code] ?? 0) + 1;
    } else if (call.method === 'chat.postMessage') {
      const at = call.at.getTime();
      firstPostAt = Math.min(firstPostAt ?? at, at);
      lastPostAt = Math.max(lastPostAt ?? at, at);
    }
  }
  const topLevelPerChannel: Record<string, number> = {};
  let threadReplies = 0;
  for (const m of standIn.messages()) {
    if (m.thread_ts !== undefined) threadReplies++;
    else if (channelPrefix === undefined || m.channel.startsWith(channelPrefix)) {
      topLevelPerChannel[m.channel] = (topLevelPerChannel[m.channel] ?? 0) + 1;
    }
  }
  return {
    callsByMethod,
    rateLimited,
    failures,
    problems: standIn.problems.length,
    firstProblems: standIn.problems.slice(0, 3).map((p) => `${p.method}: ${p.why}`),
    topLevelPerChannel,
    threadReplies,
    firstPostAt,
    lastPostAt,
  };
}

/** How the bot's result replies begin: done, refused, outcome unknown. */
const RESULT_REPLY = /^:(white_check_mark|x|warning):/;

function resizeTimes(sim: CloudSim, sinceMs: number): CallTimes['resizes'] {
  const resizes: CallTimes['resizes'] = [];
  for (const call of sim.calls) {
    if (call.route !== 'resize' || call.startMs < sinceMs) continue;
    const vmid = Number(/\/vm\/(\d+)\//.exec(call.path)?.[1]);
    if (Number.isInteger(vmid)) resizes.push({ vmid, atMs: call.startMs });
  }
  return resizes;
}

function replyTimes(standIn: StandIn, sinceMs: number): CallTimes['replies'] {
  const replies: CallTimes['replies'] = [];
  for (const call of standIn.calls) {
    if (call.method !== 'chat.postMessage' || call.atMs < sinceMs || call.response.ok !== true) continue;
    if (typeof call.args.thread_ts === 'string')
      replies.push({
        threadTs: call.args.thread_ts,
        atMs: call.atMs,
        result: typeof call.args.text === 'string' && RESULT_REPLY.test(call.args.text),
      });
  }
  return replies;
}

function cloudSummary(sim: CloudSim): CloudSummary {
  const resizeStatuses: Record<string, number> = {};
  for (const call of sim.calls) {
    if (call.route !== 'resize' && call.route !== 'restore') continue;
    const key = String(call.status ?? 'none');
    resizeStatuses[key] = (resizeStatuses[key] ?? 0) + 1;
  }
  return { calls: sim.calls.length, applied: sim.applied.length, overlaps: sim.overlaps, resizeStatuses };
}

serveProc({ run: (op) => perform(op.message as SimsOp) }, async () => {
  await Promise.allSettled([cloud?.close(), slack?.close()]);
});
