import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { type LocalRedis, startLocalRedis } from './local-redis.ts';

const run = promisify(execFile);

/** A Redis Cluster of masters and replicas, all started by this process on free loopback ports. */
export interface LocalCluster {
  /** `127.0.0.1:p1,127.0.0.1:p2,…`: the value of REDIS_CLUSTER_NODES. */
  nodesEnv: string;
  /** Every data node, in the order started. */
  nodes: LocalRedis[];
  /** The port of the master that serves `key`'s slot now. */
  masterOf(key: string): Promise<number>;
  /**
   * `CLUSTER FAILOVER` on a replica of the master serving `key`, then waits until every node names the replica as
   * the slot's master. Resolves with the old and new master's ports and how long the switch took.
   */
  failover(key: string, timeoutMs?: number): Promise<{ from: number; to: number; ms: number }>;
  /** Waits until every node reports `cluster_state:ok` and every slot covered. */
  waitForOk(timeoutMs?: number): Promise<void>;
  /** Stops every node and removes the temp dirs. */
  stop(): Promise<void>;
}

export interface LocalClusterOptions {
  masters?: number;
  /** Replicas per master. */
  replicas?: number;
  /** cluster-node-timeout: how long a silent node takes to be seen as failing. */
  nodeTimeoutMs?: number;
  /** More options for every node. */
  nodeArgs?: string[];
  /** A password every node asks for (`requirepass`, and `masterauth` for their replication). */
  password?: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` every 50 ms until it returns a value, or throws naming `what` after `timeoutMs`. */
async function until<T>(check: () => Promise<T | undefined>, what: string, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`local cluster: ${what} not within ${timeoutMs} ms`);
    await sleep(50);
  }
}

/** One line of `CLUSTER NODES`. */
interface NodeLine {
  id: string;
  port: number;
  flags: string[];
  masterId: string;
  /** `start-end` ranges (or single slots) this master serves. */
  slots: string[];
}

function parseNodes(text: string): NodeLine[] {
  return text
    .trim()
    .split('\n')
    .map((line) => {
      const [id = '', address = '', flags = '', masterId = '', , , , , ...slots] = line.split(' ');
      return {
        id,
        port: Number(address.split('@')[0]?.split(':').at(-1)),
        flags: flags.split(','),
        masterId,
        slots,
      };
    });
}

/** Whether `slot` is in one of `ranges` (`5461-10922`, `42`; importing/migrating entries are skipped). */
function serves(ranges: string[], slot: number): boolean {
  return ranges.some((range) => {
    if (range.startsWith('[')) return false;
    const [from, to = from] = range.split('-').map(Number);
    return from !== undefined && to !== undefined && slot >= from && slot <= to;
  });
}

/**
 * Starts `masters` × (1 + `replicas`) `redis-server --cluster-enabled yes` nodes, each in a temp dir of its own,
 * joins them with `redis-cli --cluster create`, and resolves once every node sees every slot covered.
 */
export async function startLocalCluster(options: LocalClusterOptions = {}): Promise<LocalCluster> {
  const masters = options.masters ?? 3;
  const replicas = options.replicas ?? 1;
  const nodes: LocalRedis[] = [];
  const clients = new Map<number, Redis>();
  const client = (port: number) => {
    let c = clients.get(port);
    if (!c) {
      c = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1 });
      c.on('error', () => undefined);
      clients.set(port, c);
    }
    return c;
  };
  const stop = async () => {
    for (const c of clients.values()) c.disconnect();
    await Promise.all(nodes.map((n) => n.stop().catch(() => undefined)));
  };
  const nodesOf = async (port: number) => parseNodes((await client(port).call('CLUSTER', 'NODES')) as string);
  const waitForOk = async (timeoutMs = 20_000) => {
    for (const node of nodes) {
      await until(
        async () => {
          const info = (await client(node.port).call('CLUSTER', 'INFO')) as string;
          return /cluster_state:ok/.test(info) && /cluster_slots_ok:16384/.test(info) ? true : undefined;
        },
        `node ${node.port} ok`,
        timeoutMs,
      );
    }
  };
  const masterOf = async (key: string) => {
    const slot = Number(await client(nodes[0]!.port).call('CLUSTER', 'KEYSLOT', key));
    const master = (await nodesOf(nodes[0]!.port)).find(
      (n) => n.flags.includes('master') && !n.flags.includes('fail') && serves(n.slots, slot),
    );
    if (!master) throw new Error(`local cluster: no master serves slot ${slot}`);
    return master.port;
  };

  try {
    const nodeArgs = [
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      'nodes.conf',
      '--cluster-node-timeout',
      String(options.nodeTimeoutMs ?? 2000),
      '--repl-diskless-sync',
      'yes',
      '--repl-diskless-sync-delay',
      '0',
      // CLUSTER SLOTS lists a replica once its offset moved; the master's pings move it within a second.
      '--repl-ping-replica-period',
      '1',
      ...(options.nodeArgs ?? []),
    ];
    for (let i = 0; i < masters * (1 + replicas); i++)
      nodes.push(await startLocalRedis({ extraArgs: nodeArgs }));
    await run(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...nodes.map((n) => `127.0.0.1:${n.port}`),
        '--cluster-replicas',
        String(replicas),
        '--cluster-yes',
      ],
      { timeout: 30_000 },
    );
    await waitForOk();
    // Every node knows every other, and which are replicas, before a client asks any of them for the slots.
    for (const node of nodes)
      await until(
        async () => {
          const view = await nodesOf(node.port);
          const followers = view.filter((n) => n.flags.includes('slave')).length;
          return view.length === nodes.length && followers === masters * replicas ? true : undefined;
        },
        `node ${node.port} sees every replica`,
        20_000,
      );
    for (const node of nodes)
      await until(
        async () => {
          const info = String(await client(node.port).info('replication'));
          return info.includes('role:master') || info.includes('master_link_status:up') ? true : undefined;
        },
        `node ${node.port} in sync`,
        20_000,
      );
    // Clients learn the replicas from CLUSTER SLOTS, which lists a replica only once the node asked has heard (by
    // gossip) that it replicated something: each node learns it in its own time, and a client may ask any of them
    // (ioredis asks one and does not ask again unless a command is redirected). A loaded run had the bot's client
    // ask a node that did not list one replica yet, and its pool lacked that node from then on.
    for (const node of nodes)
      await until(
        async () => {
          const slots = (await client(node.port).call('CLUSTER', 'SLOTS')) as unknown[][];
          return slots.every((range) => range.length - 3 >= replicas) ? true : undefined;
        },
        `every replica in node ${node.port}'s CLUSTER SLOTS`,
        20_000,
      );
    // Set once the cluster is up: the helper's own connections stay signed in, anything new must give it.
    if (options.password)
      for (const node of nodes) {
        await client(node.port).call('CONFIG', 'SET', 'masterauth', options.password);
        await client(node.port).call('CONFIG', 'SET', 'requirepass', options.password);
      }
  } catch (error) {
    await stop();
    throw error;
  }

  return {
    nodesEnv: nodes.map((n) => `127.0.0.1:${n.port}`).join(','),
    nodes,
    masterOf,
    waitForOk,
    async failover(key, timeoutMs = 20_000) {
      const started = performance.now();
      const from = await masterOf(key);
      const view = await nodesOf(from);
      const oldMaster = view.find((n) => n.port === from)!;
      const replica = view.find((n) => n.flags.includes('slave') && n.masterId === oldMaster.id);
      if (!replica) throw new Error(`local cluster: master ${from} has no replica`);
      await client(replica.port).call('CLUSTER', 'FAILOVER');
      // Done when every node names the replica as the slot's master.
      for (const node of nodes)
        await until(
          async () => {
            const self = (await nodesOf(node.port)).find((n) => n.port === replica.port);
            return self?.flags.includes('master') ? true : undefined;
          },
          `node ${node.port} sees ${replica.port} as master`,
          timeoutMs,
        );
      return { from, to: replica.port, ms: performance.now() - started };
    },
    stop,
  };
}
