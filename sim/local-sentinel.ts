import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, type LocalRedis, redisPid, startLocalRedis } from './local-redis.ts';
import { killGroup, spawnGroup } from './process-group.ts';

/** A master, its replicas and Sentinels watching them, all started by this process on free loopback ports. */
export interface SentinelGroup {
  /** The master's name at the Sentinels. */
  name: string;
  /** `127.0.0.1:p1,127.0.0.1:p2,…`: the value of REDIS_SENTINELS. */
  sentinels: string;
  sentinelPorts: number[];
  /** The data nodes: the first master, then its replicas. */
  nodes: LocalRedis[];
  /** The port of the master the Sentinels name now. */
  masterPort(): Promise<number>;
  /** The node the Sentinels name as master now. */
  master(): Promise<LocalRedis>;
  /**
   * `SENTINEL FAILOVER <name>`, then waits until every Sentinel names the new master and it answers as one.
   * Resolves with the old and new master's ports and how long the switch took.
   */
  failover(timeoutMs?: number): Promise<{ from: number; to: number; ms: number }>;
  /** Waits until every Sentinel names a master other than `oldPort` and it answers as master. */
  waitForNewMaster(oldPort: number, timeoutMs?: number): Promise<number>;
  /** Waits until every node but the master is a replica with its link up (e.g. an old master reconfigured). */
  waitForReplicas(timeoutMs?: number): Promise<void>;
  /** Stops every process (Sentinels first) and removes the temp dirs. */
  stop(): Promise<void>;
}

export interface SentinelGroupOptions {
  name?: string;
  replicas?: number;
  sentinels?: number;
  quorum?: number;
  /** Sentinel's down-after-milliseconds: how long a silent master takes to be seen as down. */
  downAfterMs?: number;
  failoverTimeoutMs?: number;
  /** More options for every data node (e.g. `--min-replicas-to-write 1`). */
  nodeArgs?: string[];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` every 50 ms until it returns a value, or throws naming `what` after `timeoutMs`. */
async function until<T>(check: () => Promise<T | undefined>, what: string, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`sentinel group: ${what} not within ${timeoutMs} ms`);
    await sleep(50);
  }
}

/** `INFO replication` of a node as a map. */
async function replicationInfo(client: Redis): Promise<Map<string, string>> {
  const text = (await client.info('replication')) as string;
  return new Map(
    text
      .split('\r\n')
      .filter((line) => line.includes(':'))
      .map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1)]),
  );
}

/** A flat `[k, v, k, v]` Sentinel reply as a map. */
function pairs(reply: unknown): Map<string, string> {
  const list = reply as string[];
  const map = new Map<string, string>();
  for (let i = 0; i + 1 < list.length; i += 2) map.set(String(list[i]), String(list[i + 1]));
  return map;
}

/**
 * Starts a master, `replicas` replicas and `sentinels` Sentinels (`redis-server --sentinel`, each with a generated
 * config in a temp dir of its own), and resolves once every Sentinel sees the master, its replicas (links up) and
 * the other Sentinels: from then on a `SENTINEL FAILOVER` or a crash of the master is handled.
 */
export async function startSentinelGroup(options: SentinelGroupOptions = {}): Promise<SentinelGroup> {
  const name = options.name ?? 'mymaster';
  const sentinelCount = options.sentinels ?? 3;
  const quorum = options.quorum ?? 2;
  const nodes: LocalRedis[] = [];
  const clients: Redis[] = [];
  const sentinelNodes: LocalRedis[] = [];
  const dirs: string[] = [];
  const client = (port: number) => {
    const c = new Redis(port, '127.0.0.1', { lazyConnect: false, maxRetriesPerRequest: 1 });
    c.on('error', () => undefined);
    clients.push(c);
    return c;
  };
  const stop = async () => {
    for (const c of clients) c.disconnect();
    for (const s of sentinelNodes) await s.stop().catch(() => undefined);
    for (const n of nodes) await n.stop().catch(() => undefined);
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  };

  try {
    const nodeArgs = [
      '--repl-diskless-sync',
      'yes',
      '--repl-diskless-sync-delay',
      '0',
      ...(options.nodeArgs ?? []),
    ];
    const master = await startLocalRedis({ extraArgs: nodeArgs });
    nodes.push(master);
    for (let i = 0; i < (options.replicas ?? 1); i++) {
      nodes.push(
        await startLocalRedis({ extraArgs: [...nodeArgs, '--replicaof', '127.0.0.1', String(master.port)] }),
      );
    }
    const nodeClients = new Map(nodes.map((n) => [n.port, client(n.port)]));
    // Sentinels start once the replicas are in sync: their first look at a replica then finds its link up.
    for (const replica of nodes.slice(1)) {
      await until(
        async () =>
          (await replicationInfo(nodeClients.get(replica.port)!)).get('master_link_status') === 'up'
            ? true
            : undefined,
        `replica ${replica.port} in sync`,
        10_000,
      );
    }

    const sentinelPorts: number[] = [];
    for (let i = 0; i < sentinelCount; i++) {
      const dir = await mkdtemp(join(tmpdir(), 'cloudops-sentinel-'));
      dirs.push(dir);
      const conf = join(dir, 'sentinel.conf');
      // A port found free may be taken before the Sentinel binds it: then it exits, and the next free port is tried.
      let started: LocalRedis | undefined;
      for (let attempt = 1; !started; attempt++) {
        const port = await freePort();
        await writeFile(
          conf,
          [
            `port ${port}`,
            'bind 127.0.0.1',
            `dir ${dir}`,
            `sentinel monitor ${name} 127.0.0.1 ${master.port} ${quorum}`,
            `sentinel down-after-milliseconds ${name} ${options.downAfterMs ?? 1000}`,
            `sentinel failover-timeout ${name} ${options.failoverTimeoutMs ?? 5000}`,
            `sentinel parallel-syncs ${name} 1`,
            '',
          ].join('\n'),
        );
        started = await startSentinel(conf, port);
        if (!started && attempt >= 5) throw new Error(`redis sentinel could not listen on port ${port}`);
      }
      sentinelNodes.push(started);
      sentinelPorts.push(started.port);
    }
    const sentinelClients = sentinelPorts.map(client);
    for (const s of sentinelClients) {
      await until(
        async () => {
          const m = pairs(await s.call('SENTINEL', 'MASTER', name));
          return Number(m.get('num-other-sentinels')) === sentinelCount - 1 &&
            Number(m.get('num-slaves')) === nodes.length - 1
            ? true
            : undefined;
        },
        'every Sentinel sees the others and the replicas',
        15_000,
      );
    }

    const masterPort = async () => {
      const [, port] = (await sentinelClients[0]!.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name)) as [
        string,
        string,
      ];
      return Number(port);
    };
    const waitForNewMaster = (oldPort: number, timeoutMs = 20_000) =>
      until(
        async () => {
          const named = await Promise.all(
            sentinelClients.map(async (s) =>
              Number(((await s.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name)) as [string, string])[1]),
            ),
          );
          const port = named[0];
          if (port === undefined || port === oldPort || named.some((p) => p !== port)) return undefined;
          const role = (await replicationInfo(nodeClients.get(port)!)).get('role');
          return role === 'master' ? port : undefined;
        },
        `a new master named by every Sentinel (old ${oldPort})`,
        timeoutMs,
      );
    const group: SentinelGroup = {
      name,
      sentinels: sentinelPorts.map((p) => `127.0.0.1:${p}`).join(','),
      sentinelPorts,
      nodes,
      masterPort,
      async master() {
        const port = await masterPort();
        const node = nodes.find((n) => n.port === port);
        if (!node) throw new Error(`sentinel group: the Sentinels name an unknown master ${port}`);
        return node;
      },
      async failover(timeoutMs = 20_000) {
        const from = await masterPort();
        const started = performance.now();
        await sentinelClients[0]!.call('SENTINEL', 'FAILOVER', name);
        const to = await waitForNewMaster(from, timeoutMs);
        return { from, to, ms: performance.now() - started };
      },
      waitForNewMaster,
      async waitForReplicas(timeoutMs = 30_000) {
        const current = await masterPort();
        for (const node of nodes.filter((n) => n.port !== current)) {
          await until(
            async () => {
              const info = await replicationInfo(nodeClients.get(node.port)!);
              return info.get('role') === 'slave' &&
                info.get('master_port') === String(current) &&
                info.get('master_link_status') === 'up'
                ? true
                : undefined;
            },
            `node ${node.port} a replica of ${current} in sync`,
            timeoutMs,
          );
        }
      },
      stop,
    };
    return group;
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * `redis-server <conf> --sentinel` on `port` in a process group of its own, stopped like a LocalRedis; undefined
 * when it exited before answering (the port was taken).
 */
async function startSentinel(conf: string, port: number): Promise<LocalRedis | undefined> {
  const child = spawnGroup('redis-server', [conf, '--sentinel'], { stdio: 'ignore' });
  await new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.once('spawn', () => resolve());
  });
  const url = `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) return undefined;
    if ((await redisPid(url, 500)) === child.pid) break;
    if (Date.now() > deadline) {
      killGroup(child);
      throw new Error(`redis sentinel on port ${port} did not answer within 30 s`);
    }
    await sleep(25);
  }
  const exited = () => child.exitCode !== null || child.signalCode !== null;
  const kill = async (signal: NodeJS.Signals) => {
    if (exited()) return;
    const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    killGroup(child, signal);
    const timer = setTimeout(() => killGroup(child, 'SIGKILL'), 2000);
    await gone;
    clearTimeout(timer);
  };
  return {
    url,
    port,
    dir: conf,
    stop: () => kill('SIGTERM'),
    kill: () => kill('SIGKILL'),
    restart: () => Promise.reject(new Error('a Sentinel of the group is not restarted')),
  };
}
