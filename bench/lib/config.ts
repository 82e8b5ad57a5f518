import { parseArgs } from 'node:util';

/** Sizes and knobs of one bench run; `--quick` shrinks everything to a smoke run. */
export interface BenchConfig {
  quick: boolean;
  /** Measured runs per figure (the table shows their median). */
  runs: number;
  /** Interleaved bot/baseline pairs behind every ratio (median and min–max of the pairs). */
  pairs: number;
  /** Scenarios to run, by name; all when empty. */
  only: string[];
  /** Where results go (default bench/results.json). */
  out?: string;
  latency: { clicks: number; perSecond: number; timeoutMs: number };
  /** Tracing off against on: Approve clicks per run, their rate. */
  tracing: { clicks: number; perSecond: number; timeoutMs: number };
  /** Agents over MCP: requests per run (each asked, then approved with a get_request wait). */
  mcp: { requests: number; timeoutMs: number };
  command: { count: number; perSecond: number };
  retention: { requests: number; retentionDays: number };
  /** `jobsPerProcess`: each worker process's execute and notify concurrency in the scaling runs. */
  workers: { requests: number; vms: number; latencyMs: number; jobsPerProcess: number; timeoutMs: number };
  ack: {
    rates: number[];
    durationMs: number;
    burst: number;
    warmupMs: number;
    connections: number;
    /** ROLE the bot runs with: 'web' keeps the queue work the clicks cause out of the measurement. */
    role: 'web' | 'all';
  };
  pipeline: { requests: number; concurrency: number; timeoutMs: number };
  fairness: { requests: number; vms: number; latencyMs: number; timeoutMs: number };
  digest: { channels: number; perChannelPerSecond: number; clusters: number; timeoutMs: number };
  footprint: { pipelineRequests: number; settleMs: number; readyTimeoutMs: number };
  /** `flows` whole resizes per run at `perSecond`; each step waits `stepTimeoutMs`, all replies `replyTimeoutMs`. */
  steady: {
    flows: number;
    perSecond: number;
    settleMs: number;
    stepTimeoutMs: number;
    replyTimeoutMs: number;
    readyTimeoutMs: number;
    /**
     * Node flag sets the bot runs on, each beside the bare app on the same flags (`--steady-flags`); absent:
     * `npm start`'s. A bot on Node's defaults runs too, as the CPU reference.
     */
    flags?: string[][];
    /** The whole scenario's limit: it paces its resizes, so it takes what its size says (runs × pairs). */
    limitMs: number;
  };
  logLevel: string;
  redisUrl: string;
  /** Start a redis-server of the bench's own instead of using REDIS_URL (no other load on it). */
  ownRedis: boolean;
}

export const SCENARIOS = [
  'latency',
  'command',
  'pipeline',
  'retention',
  'workers',
  'ack',
  'fairness',
  'digest',
  'footprint',
  'tracing',
  'mcp',
  'deadlines',
  'steady',
] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

const USAGE = () => `npm run bench -- [options]
  --quick                smoke run: small sizes, 1 run
  --runs N               measured runs per figure of ack, fairness, digest, footprint (median shown; default 3)
  --pairs N              interleaved bot/baseline pairs behind each ratio (default 5)
  --only a,b             scenarios: ${SCENARIOS.join(', ')}
  --out FILE             write the results there instead of bench/results.json
  --clicks N             Approve clicks per latency run (default 100, at 10/s)
  --tracing-clicks N     Approve clicks per run of the tracing off/on scenario (default 200, at 20/s)
  --mcp-requests N       agent requests per run of the mcp scenario (default 50)
  --commands N           /cloud resize commands per CPU run (default 400, at 100/s)
  --retention N          approved requests in the Redis bytes scenario (default 1000)
  --workers N            approved requests per worker-scaling run (default 1000, API at 20 ms)
  --worker-jobs N        execute and notify jobs at once in each worker process of those runs (default 2: the
                         work waits on the API rather than on 2 shared cores; the bot's own default is 16)
  --duration MS          each fixed-rate ack run (default 8000)   --rates 100,400   --burst N (default 1000)
  --connections N        load-generator sockets (default 1000)     --ack-role web|all (default web)
  --pipeline N           approved resizes per pipeline run (default 5000)
  --concurrency N        the bot's execute concurrency, for the bare BullMQ baseline and the fairness ideal (default 4)
  --fairness N --vms N --latency MS   fairness requests, VMs, simulator latency per resize (1000, 10, 20)
  --digest N             channels due at the same second (default 500)   --digest-clusters N (default 40)
  --steady N             whole resizes per steady-load run (command → modal → submit → approve → reply; default
                         500, at 11/s); memory is read after 0, 100, 300 and N
  --steady-flags='A|B'  Node flag sets of the steady runs, '|' between sets, 'defaults' for none (default: npm
                         start's); NAME=value in a set is environment (MALLOC_ARENA_MAX=2); each runs beside the
                         bare app on the same set, and a bot on Node's defaults runs as the CPU reference; the
                         first set is the one the targets judge
  --log-level LEVEL      bot log level (default info; logs go to a temp file)
  --own-redis            start a private redis-server instead of REDIS_URL
Environment: REDIS_URL (default redis://127.0.0.1:6379; a redis-server is started when none answers),
  BENCH_RUNS, BENCH_DURATION_MS, BENCH_PIPELINE, BENCH_CONCURRENCY.`;

const int = (value: string | undefined, name: string): number | undefined => {
  if (value === undefined || value === '') return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0)
    throw new Error(`${name}: expected a positive whole number, got "${value}"`);
  return n;
};

/** Parses flags (and a few BENCH_* variables); throws with the usage on anything unknown. */
export function parseConfig(argv: string[], env: Record<string, string | undefined>): BenchConfig {
  let values: ReturnType<typeof parse>['values'];
  try {
    values = parse(argv).values;
  } catch (error) {
    throw new Error(`${(error as Error).message}\n${USAGE()}`);
  }
  if (values.help) throw new Error(USAGE());
  const quick = values.quick === true;
  const only = (values.only ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const name of only) {
    if (!(SCENARIOS as readonly string[]).includes(name))
      throw new Error(`--only: unknown scenario "${name}"\n${USAGE()}`);
  }
  const role = values['ack-role'] ?? 'web';
  if (role !== 'web' && role !== 'all') throw new Error(`--ack-role: expected web or all\n${USAGE()}`);
  const rates = (values.rates ?? '100,400').split(',').map((r) => int(r, '--rates')!);
  const pairs = int(values.pairs, '--pairs') ?? 5;
  return {
    quick,
    runs: int(values.runs ?? env.BENCH_RUNS, '--runs') ?? (quick ? 1 : 3),
    pairs,
    only,
    out: values.out,
    latency: {
      clicks: int(values.clicks, '--clicks') ?? (quick ? 20 : 100),
      // Spaced out, so the figure is a click's own latency rather than a queue behind earlier clicks.
      perSecond: 10,
      timeoutMs: quick ? 60_000 : 120_000,
    },
    tracing: {
      clicks: int(values['tracing-clicks'], '--tracing-clicks') ?? (quick ? 20 : 200),
      perSecond: 20,
      timeoutMs: quick ? 60_000 : 120_000,
    },
    mcp: {
      requests: int(values['mcp-requests'], '--mcp-requests') ?? (quick ? 10 : 50),
      timeoutMs: quick ? 60_000 : 120_000,
    },
    command: { count: int(values.commands, '--commands') ?? (quick ? 40 : 400), perSecond: 100 },
    retention: { requests: int(values.retention, '--retention') ?? (quick ? 50 : 1000), retentionDays: 30 },
    workers: {
      requests: int(values.workers, '--workers') ?? (quick ? 40 : 1000),
      vms: quick ? 10 : 100,
      latencyMs: 20,
      jobsPerProcess: int(values['worker-jobs'], '--worker-jobs') ?? 2,
      timeoutMs: quick ? 60_000 : 300_000,
    },
    ack: {
      rates,
      durationMs: int(values.duration ?? env.BENCH_DURATION_MS, '--duration') ?? (quick ? 1000 : 8000),
      burst: int(values.burst, '--burst') ?? (quick ? 200 : 1000),
      warmupMs: quick ? 500 : 2000,
      connections: int(values.connections, '--connections') ?? (quick ? 200 : 1000),
      role,
    },
    pipeline: {
      requests: int(values.pipeline ?? env.BENCH_PIPELINE, '--pipeline') ?? (quick ? 200 : 5000),
      concurrency: int(values.concurrency ?? env.BENCH_CONCURRENCY, '--concurrency') ?? 0,
      timeoutMs: quick ? 120_000 : 300_000,
    },
    fairness: {
      requests: int(values.fairness, '--fairness') ?? (quick ? 100 : 1000),
      vms: int(values.vms, '--vms') ?? 10,
      latencyMs: int(values.latency, '--latency') ?? 20,
      timeoutMs: quick ? 120_000 : 300_000,
    },
    digest: {
      channels: int(values.digest, '--digest') ?? (quick ? 20 : 500),
      perChannelPerSecond: 1,
      clusters: int(values['digest-clusters'], '--digest-clusters') ?? 40,
      timeoutMs: quick ? 120_000 : 300_000,
    },
    footprint: {
      pipelineRequests: quick ? 100 : 1000,
      settleMs: quick ? 1000 : 3000,
      readyTimeoutMs: 60_000,
    },
    steady: steadyConfig(
      int(values.steady, '--steady') ?? (quick ? 120 : 500),
      quick,
      pairs,
      parseFlagSets(values['steady-flags']),
    ),
    logLevel: values['log-level'] ?? 'info',
    redisUrl: env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    ownRedis: values['own-redis'] === true,
  };
}

/** `--steady-flags`: sets of Node flags split on '|', each on spaces; 'defaults' (or nothing) is no flag. */
function parseFlagSets(value: string | undefined): string[][] | undefined {
  if (value === undefined) return undefined;
  const sets = value.split('|').map((set) =>
    set
      .trim()
      .split(/\s+/)
      .filter((flag) => flag !== '' && flag !== 'defaults'),
  );
  for (const flag of sets.flat())
    if (!flag.startsWith('--') && !/^[A-Z_][A-Z0-9_]*=/.test(flag))
      throw new Error(`--steady-flags: "${flag}" is neither a Node flag nor NAME=value\n${USAGE()}`);
  return sets;
}

function steadyConfig(
  flows: number,
  quick: boolean,
  pairs: number,
  flags: string[][] | undefined,
): BenchConfig['steady'] {
  // About what the measurement sent: one resize after another, 11 a second.
  const perSecond = 11;
  const settleMs = quick ? 1000 : 3000;
  // Each run: start-up, settling, the paced resizes, the last replies, stopping (about 20 s besides the resizes).
  const runMs = (flows / perSecond) * 1000 + settleMs + 20_000;
  // Each flag set: the bot and the bare app; and the bot on Node's defaults unless a set is the defaults.
  const sets = flags ?? [['npm start']];
  const runsPerRound = 2 * sets.length + (sets.some((set) => set.length === 0) ? 0 : 1);
  return {
    flows,
    perSecond,
    settleMs,
    stepTimeoutMs: 15_000,
    replyTimeoutMs: quick ? 60_000 : 120_000,
    readyTimeoutMs: 60_000,
    flags,
    limitMs: runsPerRound * pairs * runMs + 60_000,
  };
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      quick: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
      runs: { type: 'string' },
      pairs: { type: 'string' },
      only: { type: 'string' },
      out: { type: 'string' },
      clicks: { type: 'string' },
      'tracing-clicks': { type: 'string' },
      'mcp-requests': { type: 'string' },
      commands: { type: 'string' },
      retention: { type: 'string' },
      workers: { type: 'string' },
      'worker-jobs': { type: 'string' },
      duration: { type: 'string' },
      rates: { type: 'string' },
      burst: { type: 'string' },
      connections: { type: 'string' },
      'ack-role': { type: 'string' },
      pipeline: { type: 'string' },
      concurrency: { type: 'string' },
      fairness: { type: 'string' },
      vms: { type: 'string' },
      latency: { type: 'string' },
      digest: { type: 'string' },
      'digest-clusters': { type: 'string' },
      steady: { type: 'string' },
      'steady-flags': { type: 'string' },
      'log-level': { type: 'string' },
      'own-redis': { type: 'boolean' },
    },
  });
}
