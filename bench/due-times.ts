/**
 * The due-times set and its scheduler (issue 11): what an idle scheduler costs Redis, and how fast several
 * schedulers (each on its own connection, as separate bot processes would be) drain a backlog, each item once.
 * Runs on a redis-server of its own.
 *
 *   npm run bench:due -- [--items 10000] [--schedulers 4] [--runs 5] [--idle-s 30]
 */
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { startLocalRedis } from '../sim/local-redis.ts';
import { DUE_POLICY, DueTimes, startDueScheduler } from '../src/jobs/due-times.ts';
import { createLogger } from '../src/observability/logger.ts';
import { median } from './lib/stats.ts';

const { values } = parseArgs({
  options: {
    items: { type: 'string', default: '10000' },
    schedulers: { type: 'string', default: '4' },
    runs: { type: 'string', default: '5' },
    'idle-s': { type: 'string', default: '30' },
  },
});
const ITEMS = Number(values.items);
const SCHEDULERS = Number(values.schedulers);
const RUNS = Number(values.runs);
const IDLE_S = Number(values['idle-s']);
const PREFIX = 'bench-due';
const logger = createLogger({ level: 'warn' });

/** Commands Redis ran since the last CONFIG RESETSTAT, by command. */
async function commandCounts(redis: Redis): Promise<Record<string, number>> {
  const info = await redis.info('commandstats');
  const out: Record<string, number> = {};
  for (const match of info.matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm)) out[match[1]!] = Number(match[2]);
  return out;
}

const server = await startLocalRedis();
const admin = new Redis(server.url);
try {
  // Idle: 1000 items due in a day, one scheduler with the production policy; what does it ask of Redis?
  const idleDue = new DueTimes(admin, PREFIX);
  const later = new Date(Date.now() + 86_400_000);
  for (let i = 0; i < 1000; i++) await idleDue.set({ kind: 'remind', requestId: `IDLE${i}` }, later);
  const idleConnection = new Redis(server.url);
  await admin.config('RESETSTAT');
  const idle = startDueScheduler(
    { due: new DueTimes(idleConnection, PREFIX), handlers: noHandlers(), now: () => new Date(), logger },
    DUE_POLICY,
  );
  await new Promise((r) => setTimeout(r, IDLE_S * 1000));
  await idle.stop();
  const counts = await commandCounts(admin);
  const idleCalls = Object.entries(counts)
    .filter(([name]) => name !== 'config' && name !== 'info')
    .reduce((sum, [, n]) => sum + n, 0);
  console.log(
    `idle: ${idleCalls} Redis commands in ${IDLE_S} s with 1000 items not yet due (${((idleCalls / IDLE_S) * 60).toFixed(1)}/min; poll every ${DUE_POLICY.pollMs} ms)`,
  );
  idleConnection.disconnect();
  await admin.del(`${PREFIX}:due`);

  // Drain: ITEMS due now, SCHEDULERS loops at once; each item must be handled exactly once.
  const times: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    const now = new Date();
    const pipeline = admin.pipeline();
    for (let i = 0; i < ITEMS; i++) pipeline.zadd(`${PREFIX}:due`, now.getTime() - i, `remind:R${run}-${i}`);
    await pipeline.exec();
    const handled = new Map<string, number>();
    const connections = Array.from({ length: SCHEDULERS }, () => new Redis(server.url));
    const started = performance.now();
    let resolveDone: () => void = () => undefined;
    const done = new Promise<void>((r) => {
      resolveDone = r;
    });
    const loops = connections.map((connection) =>
      startDueScheduler(
        {
          due: new DueTimes(connection, PREFIX),
          handlers: {
            ...noHandlers(),
            remind: async (id) => {
              handled.set(id, (handled.get(id) ?? 0) + 1);
              if (handled.size === ITEMS) resolveDone();
            },
          },
          now: () => new Date(),
          logger,
        },
        { pollMs: 20, leaseMs: 60_000, batch: 100 },
      ),
    );
    await done;
    const ms = performance.now() - started;
    await Promise.all(loops.map((l) => l.stop()));
    for (const c of connections) c.disconnect();
    const twice = [...handled.values()].filter((n) => n !== 1).length;
    const left = await admin.zcard(`${PREFIX}:due`);
    if (twice > 0 || left > 0) throw new Error(`run ${run}: ${twice} handled more than once, ${left} left`);
    times.push(ms);
    console.log(
      `drain run ${run + 1}: ${ITEMS} items, ${SCHEDULERS} schedulers: ${ms.toFixed(0)} ms, each once`,
    );
  }
  const sorted = [...times].sort((a, b) => a - b);
  console.log(
    `drain: median ${median(times).toFixed(0)} ms (${((ITEMS / median(times)) * 1000).toFixed(0)} items/s), spread ${sorted[0]!.toFixed(0)}-${sorted[sorted.length - 1]!.toFixed(0)} ms over ${RUNS} runs`,
  );
} finally {
  admin.disconnect();
  await server.stop();
}

function noHandlers() {
  const none = async () => undefined;
  return { remind: none, escalate: none, 'freeze-end': none };
}
