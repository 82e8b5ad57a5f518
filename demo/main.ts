/**
 * `npm run demo`: the whole bot on a fresh machine, with no account and no configuration. Starts Redis (REDIS_URL
 * when it answers, else a redis-server of its own), the cloud API simulator, the Slack Web API stand-in and the bot
 * in HTTP mode (`npm run demo -- --socket`: Socket Mode, over the stand-in's WebSocket), plays a session with the
 * requests Slack would send, prints it as the channel reads it, and exits 0 when every step did what it should.
 */
import { randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { type CloudSim, DEFAULT_SEED, startCloudSim } from '../sim/cloud/server.ts';
import { ensureRedis, type LocalRedis, RedisNotInstalledError } from '../sim/local-redis.ts';
import { type SlackStandIn, startSlackStandIn } from '../sim/slack/server.ts';
import { loadEnv } from '../src/config/env.ts';
import { parsePolicy } from '../src/config/policy.ts';
import { type Running, startCloudops } from '../src/main.ts';
import { createLogger } from '../src/observability/logger.ts';
import { CONFIRM, FIELDS } from '../src/slack/blocks/modals.ts';
import { ACTIONS } from '../src/slack/blocks/request-message.ts';
import { Conversation } from './conversation.ts';
import {
  type Ack,
  type Actor,
  buttonClick,
  deliverOverSocket,
  interaction,
  postSigned,
  slashCommand,
  viewSubmission,
} from './slack-requests.ts';

const TEAM = 'T0DEMO';
const CHANNEL = 'C0SHOPPROD';
const ALICE = 'U0ALICE';
const BOB = 'U0BOB';
/** How people and channels read in the transcript. */
const NAMES: Record<string, string> = { [ALICE]: 'alice', [BOB]: 'bob', [CHANNEL]: 'shop-prod' };
const PROJECT_UUID = DEFAULT_SEED.projects[0]?.uuid ?? '0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10';
/** How long the demo waits for one thing to show in Slack before it calls the step failed. */
const STEP_TIMEOUT_MS = 15_000;

/** The demo's policy: one project on the simulator's default seed; alice requests, bob approves. */
const DEMO_POLICY = `
workspace: ${TEAM}
currency: EUR
approvers: [${BOB}]
resize_fields:
  cpu_class: { field: cpu_type, values: [regular, light] }
  private_network: { field: private_network, values: ["off", "on"] }
projects:
  - name: shop-prod
    uuid: ${PROJECT_UUID}
    cluster: zone-1
    channels: [${CHANNEL}]
    vms:
      - { vmid: 101, name: web-1, ha: true, cores: 2, ram_gb: 4, os_disk_gb: 50, cpu_class: regular, wan_mode: ipv4 }
      - { vmid: 102, name: db-1, cores: 4, ram_gb: 8, os_disk_gb: 100, cpu_class: regular, wan_mode: ipv4 }
`;

/** A step that did not do what it should; the message says what was expected. */
class DemoStepError extends Error {
  override readonly name = 'DemoStepError';
}

function check(condition: boolean, expected: string): void {
  if (!condition) throw new DemoStepError(expected);
}

/** How Slack reaches the bot: signed HTTP to a public URL, or Socket Mode (an app-level token, no public URL). */
export type DemoMode = 'http' | 'socket';

interface World {
  mode: DemoMode;
  redis: { url: string; started?: LocalRedis };
  sim: CloudSim;
  slack: SlackStandIn;
  bot: Running;
  prefix: string;
  signingSecret: string;
  logs: string[];
}

/** Starts Redis, the simulators and the bot; throws RedisNotInstalledError when no Redis can be had. */
async function startWorld(redisUrl: string, mode: DemoMode): Promise<World> {
  const redis = await ensureRedis(redisUrl);
  const botToken = `xoxb-demo-${randomBytes(8).toString('hex')}`;
  const appToken = `xapp-1-demo-${randomBytes(8).toString('hex')}`;
  const signingSecret = randomBytes(16).toString('hex');
  const apiKey = `demo-${randomBytes(12).toString('hex')}`;
  // The demo's own key, new each run like its prefix: nothing it seals outlives the run.
  const sealKey = randomBytes(32).toString('hex');
  const prefix = `cloudops-demo-${randomBytes(4).toString('hex')}`;
  const sim = await startCloudSim({ apiKey });
  const slack = await startSlackStandIn({ botToken, appToken, teamId: TEAM });
  const env = loadEnv({
    SLACK_BOT_TOKEN: botToken,
    SLACK_SIGNING_SECRET: signingSecret,
    SLACK_APP_TOKEN: mode === 'socket' ? appToken : undefined,
    SLACK_API_URL: slack.apiUrl,
    CLOUD_API_URL: sim.url,
    CLOUD_API_KEY: apiKey,
    SEAL_KEY: sealKey,
    REDIS_URL: redis.url,
    REDIS_PREFIX: prefix,
    PORT: '0',
    METRICS_PORT: '0',
    ROLE: 'all',
    LOG_LEVEL: 'info',
  });
  // The bot's own log goes to memory: shown only when a step fails.
  const logs: string[] = [];
  const logger = createLogger(
    { level: 'info', secrets: [botToken, appToken, signingSecret, apiKey, sealKey] },
    { write: (line: string) => void logs.push(line) },
  );
  const bot = await startCloudops(env, parsePolicy(DEMO_POLICY, 'demo-policy.yml'), { logger });
  return { mode, redis, sim, slack, bot, prefix, signingSecret, logs };
}

async function stopWorld(world: World): Promise<void> {
  await world.bot.stop().catch(() => undefined);
  await Promise.all([world.sim.close(), world.slack.close()]).catch(() => undefined);
  const client = new Redis(world.redis.url, { maxRetriesPerRequest: 1 });
  try {
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${world.prefix}*`, 'COUNT', 500);
      cursor = next;
      if (keys.length > 0) await client.del(...keys);
    } while (cursor !== '0');
  } finally {
    client.disconnect();
  }
  await world.redis.started?.stop();
}

/** The scripted session: each step acts like a person in Slack, then checks what the bot and the API did. */
async function play(world: World, talk: Conversation): Promise<number> {
  const { slack, sim } = world;
  const events = `http://127.0.0.1:${world.bot.port}/slack/events`;
  const actor = (user: string): Actor => ({ user, channel: CHANNEL, team: TEAM });
  const send = (body: string) =>
    world.mode === 'socket'
      ? deliverOverSocket(slack.socket, body)
      : postSigned(events, world.signingSecret, body);
  const wait = <T>(predicate: () => T | undefined | null | false, what: string) =>
    slack.waitFor(predicate, STEP_TIMEOUT_MS).catch(() => {
      throw new DemoStepError(what);
    });
  /** Lets trailing messages of a step arrive (an edit after a reply) before they are printed. */
  const settle = async () => {
    let count = -1;
    for (let i = 0; i < 30 && count !== slack.calls.length + slack.responses.length; i++) {
      count = slack.calls.length + slack.responses.length;
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    talk.flush();
  };
  const command = async (user: string, text: string): Promise<Ack> => {
    talk.says(user, `/cloud ${text}`);
    const ack = await send(
      slashCommand(actor(user), text, slack.triggerId(), slack.responseUrl({ channel: CHANNEL, user })),
    );
    check(ack.status === 200, `/cloud ${text} is answered with HTTP 200 (got ${ack.status})`);
    talk.ack(ack, user);
    return ack;
  };
  const openForm = async (user: string, text: string) => {
    const before = slack.views.length;
    await command(user, text);
    const opened = await wait(
      () => slack.views.slice(before).find((v) => v.method === 'views.open'),
      `/cloud ${text} opens a form`,
    );
    await settle();
    return opened.view;
  };
  const submit = async (
    user: string,
    view: Record<string, unknown>,
    values: Record<string, string | string[]>,
    what: string,
  ) => {
    talk.says(user, what);
    const ack = await send(interaction(viewSubmission(actor(user), view, values, slack.triggerId())));
    check(ack.status === 200, `the form submission is answered with HTTP 200 (got ${ack.status})`);
    talk.ack(ack, user, view);
    return ack;
  };
  const requestMessage = (predicate: (text: string) => boolean, what: string) =>
    wait(
      () =>
        slack
          .messages(CHANNEL)
          .find(
            (m) =>
              m.thread_ts === undefined && /\(request [^)]+\)/.test(m.text ?? '') && predicate(m.text ?? ''),
          ),
      what,
    );
  const click = async (
    user: string,
    label: string,
    actionId: string,
    message: { ts: string; text?: string; blocks?: unknown[] },
  ) => {
    const requestId = /\(request ([^)]+)\)/.exec(message.text ?? '')?.[1] ?? '';
    talk.says(user, `clicks [${label}]`);
    const ack = await send(
      interaction(
        buttonClick(
          actor(user),
          { actionId, value: requestId, blockId: `request:${requestId}` },
          message,
          slack.triggerId(),
          slack.responseUrl({ channel: CHANNEL, user, messageTs: message.ts }),
        ),
      ),
    );
    check(ack.status === 200, `the click is answered with HTTP 200 (got ${ack.status})`);
    return requestId;
  };
  let steps = 0;

  talk.step('1. What does a VM cost where? /cloud clusters');
  const answers = slack.responses.length;
  await command(ALICE, 'clusters');
  const prices = await wait(() => slack.responses[answers], 'the cluster list arrives');
  const listed = JSON.stringify(prices.body);
  check(listed.includes('zone-1') && listed.includes('zone-2'), 'the cluster list names zone-1 and zone-2');
  await settle();
  steps++;

  talk.step('2. A resize the rules refuse (the OS disk cannot shrink), then corrected');
  const form = await openForm(ALICE, 'resize shop-prod 102 disk=60');
  const refused = await submit(
    ALICE,
    form,
    { [FIELDS.reason]: 'more room for the orders table' },
    'submits the form',
  );
  const errors = (refused.json?.errors ?? {}) as Record<string, string>;
  check(
    refused.json?.response_action === 'errors' && FIELDS.osDiskGb in errors,
    'the disk shrink is refused in the form, on the OS disk field',
  );
  check(sim.applied.length === 0, 'nothing is sent to the API');
  const accepted = await submit(
    ALICE,
    form,
    { [FIELDS.osDiskGb]: '150', [FIELDS.reason]: 'more room for the orders table' },
    'changes OS disk to 150 GB and submits again',
  );
  check(accepted.json?.response_action === 'clear', 'the corrected form is accepted');
  const posted = await requestMessage(
    (text) => /resize/i.test(text),
    'the request message is posted in #shop-prod',
  );
  await settle();
  steps++;

  talk.step('3. Approval by a second person, the API call, the reply in the thread');
  const ephemerals = slack.ephemerals(CHANNEL, ALICE).length;
  await click(ALICE, 'Approve', ACTIONS.approve, posted);
  await wait(
    () => slack.ephemerals(CHANNEL, ALICE).length > ephemerals,
    'alice is told she cannot approve her own request',
  );
  await settle();
  check(sim.applied.length === 0, 'a self-approval sends nothing');
  await click(BOB, 'Approve', ACTIONS.approve, posted);
  await wait(
    () => slack.thread(CHANNEL, posted.ts).find((m) => /Done/.test(m.text ?? '')),
    'the thread says the resize is done',
  );
  await requestMessage((text) => /Done|Succeeded/i.test(text), 'the request message shows its final state');
  await settle();
  check(
    sim.applied.length === 1 && sim.vm(PROJECT_UUID, 102).osDiskGb === 150,
    'the API resized VM 102 to 150 GB, once',
  );
  steps++;

  talk.step('4. A restore from a backup');
  const restoreForm = await openForm(ALICE, 'restore shop-prod 102 pre-upgrade.2');
  const restoreAck = await submit(
    ALICE,
    restoreForm,
    {
      [FIELDS.confirm]: [CONFIRM.stopped],
      [FIELDS.typedVmid]: '102',
      [FIELDS.reason]: 'bad migration last night',
    },
    'ticks "the VM is stopped", types 102 again and submits',
  );
  check(restoreAck.json?.response_action === 'clear', 'the restore form is accepted');
  const restoreMessage = await requestMessage(
    (text) => /restore/i.test(text),
    'the restore request is posted',
  );
  await settle();
  await click(BOB, 'Approve', ACTIONS.approve, restoreMessage);
  const restored = await wait(
    () => slack.thread(CHANNEL, restoreMessage.ts).find((m) => /Task id/i.test(m.text ?? '')),
    'the thread gives the restore task id',
  );
  await settle();
  const task = sim.applied.find((a) => a.route === 'restore');
  check(
    task?.taskId !== undefined && (restored.text ?? '').includes(task.taskId),
    'the reply carries the API task id',
  );
  steps++;

  talk.step('5. The pricing digest, now');
  await command(BOB, 'digest now');
  await wait(
    () =>
      slack
        .messages(CHANNEL)
        .find((m) => m.thread_ts === undefined && (m.text ?? '').startsWith('Pricing digest')),
    'the digest is posted in #shop-prod',
  );
  await settle();
  steps++;

  talk.step('6. What happened here: /cloud jobs');
  const before = slack.responses.length;
  const jobs = await command(ALICE, 'jobs');
  const listing = jobs.json
    ? JSON.stringify(jobs.json)
    : JSON.stringify((await wait(() => slack.responses[before], 'the job list arrives')).body);
  await settle();
  const ids = [posted, restoreMessage].map((m) => /\(request ([^)]+)\)/.exec(m.text ?? '')?.[1] ?? '?');
  check(
    ids.every((id) => listing.includes(id)),
    `the job list shows the resize and the restore (${ids.join(', ')})`,
  );
  steps++;

  if (world.mode === 'socket') {
    talk.step('7. Slack refreshes the Socket Mode link; the bot reconnects on its own');
    const opened = slack.socket.connections;
    const asked = performance.now();
    slack.socket.disconnect('refresh_requested');
    await slack.socket.waitForConnection(opened + 1, STEP_TIMEOUT_MS).catch(() => {
      throw new DemoStepError('the bot opens a new link after Slack asked it to reconnect');
    });
    talk.note(
      `the link was refreshed: connection ${opened + 1}, after ${Math.round(performance.now() - asked)} ms`,
    );
    const help = await command(ALICE, 'help');
    check(help.json?.response_type === 'ephemeral', '/cloud help is answered over the new link');
    await settle();
    steps++;
  }
  return steps;
}

/** Runs the demo; resolves to the process exit code. Redis: `redisUrl` when it answers, else one of its own. */
export async function runDemo(
  options: { write?: (text: string) => void; redisUrl?: string; mode?: DemoMode } = {},
): Promise<number> {
  const write = options.write ?? ((text: string) => process.stdout.write(text));
  const mode = options.mode ?? 'http';
  write(
    `cloudops demo: Redis, the cloud API simulator, a Slack stand-in and the bot, all on this machine (${mode === 'socket' ? 'Socket Mode' : 'HTTP mode'}).\n`,
  );
  let world: World;
  try {
    world = await startWorld(options.redisUrl ?? (process.env.REDIS_URL || 'redis://127.0.0.1:6379'), mode);
  } catch (error) {
    if (error instanceof RedisNotInstalledError) {
      process.stderr.write(`cloudops demo: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
  const reachedBy =
    mode === 'socket'
      ? `bot connected to the Slack stand-in over Socket Mode (no public URL), health on http://127.0.0.1:${world.bot.port}/healthz`
      : `bot on http://127.0.0.1:${world.bot.port}/slack/events`;
  write(
    `Redis ${world.redis.started ? 'started for the demo' : 'found'} at ${world.redis.url}; cloud simulator at ${world.sim.url}; ` +
      `${reachedBy}. People: alice (developer), bob (approver) in #shop-prod.\n`,
  );
  const talk = new Conversation(world.slack, NAMES, write);
  let code = 0;
  try {
    const steps = await play(world, talk);
    const problems = world.slack.problems;
    check(
      problems.length === 0,
      `Slack would accept every call (problems: ${JSON.stringify(problems).slice(0, 300)})`,
    );
    write(
      `\n✔ Demo complete: ${steps} steps did what they should. ${world.sim.applied.length} API changes, ${world.slack.calls.length} Slack calls.\n`,
    );
  } catch (error) {
    talk.flush();
    const what = error instanceof DemoStepError ? `expected: ${error.message}` : String(error);
    process.stderr.write(`\n✗ Demo failed, ${what}\nLast bot log lines:\n${world.logs.slice(-15).join('')}`);
    code = 1;
  } finally {
    await stopWorld(world);
  }
  return code;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await runDemo({ mode: process.argv.includes('--socket') ? 'socket' : 'http' });
}
