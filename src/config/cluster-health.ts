import type { Cluster } from 'ioredis';

/** How many hash slots a Redis Cluster has; every one must be served for every key to be reachable. */
export const CLUSTER_SLOTS = 16384;

/** A Redis Cluster as the bot sees it: the nodes it knows, those that answered, the slots served. */
export interface ClusterHealth {
  /** Every slot is served and the nodes say the cluster is ok. */
  ok: boolean;
  nodes: number;
  answering: number;
  masters: number;
  slotsCovered: number;
  /** `cluster_state` of the answering nodes (`ok`, `fail`), `unknown` when none answered. */
  state: string;
  /** One line for start-up, `/readyz` and `cloudops doctor`. */
  line: string;
}

/** `CLUSTER INFO` as a map. */
function fields(text: string): Map<string, string> {
  return new Map(
    text
      .split(/\r?\n/)
      .filter((line) => line.includes(':'))
      .map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).trim()]),
  );
}

/**
 * Asks every node the client knows for `CLUSTER INFO`, each within `timeoutMs`. The worst answer counts: a node
 * that sees slots uncovered or the cluster failing is what some command of the bot would meet.
 */
export async function clusterHealth(cluster: Cluster, timeoutMs = 1000): Promise<ClusterHealth> {
  const known = cluster.nodes('all');
  const answers = await Promise.all(
    known.map(async (node) => {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), timeoutMs);
      });
      const info = node.call('CLUSTER', 'INFO').then(
        (text) => fields(String(text)),
        () => undefined,
      );
      const answer = await Promise.race([info, timeout]);
      clearTimeout(timer);
      return answer;
    }),
  );
  const views = answers.filter((a): a is Map<string, string> => a !== undefined);
  const number = (view: Map<string, string>, key: string) => Number(view.get(key) ?? 0);
  const slotsCovered = views.length === 0 ? 0 : Math.min(...views.map((v) => number(v, 'cluster_slots_ok')));
  const masters = views.length === 0 ? 0 : Math.min(...views.map((v) => number(v, 'cluster_size')));
  const nodes = Math.max(known.length, ...views.map((v) => number(v, 'cluster_known_nodes')));
  const failing = views.find((v) => v.get('cluster_state') !== 'ok');
  const state = views.length === 0 ? 'unknown' : (failing?.get('cluster_state') ?? 'ok');
  const ok = state === 'ok' && slotsCovered === CLUSTER_SLOTS;
  const line =
    `Redis Cluster: ${views.length} of ${nodes} nodes answering, ${slotsCovered} of ${CLUSTER_SLOTS} slots ` +
    `covered (${masters} masters, state ${state})`;
  return { ok, nodes, answering: views.length, masters, slotsCovered, state, line };
}
