import { request } from 'undici';

/** One node of V8's sampling heap profile: a call frame, what it allocated itself, its callees. */
interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

/** Allocated bytes by the function that allocated them, and by the deepest frame of the bot's own code above. */
export interface AllocationSummary {
  totalMb: number;
  top: { where: string; mb: number }[];
  /** By the innermost frame in dist/ (the bot's bundle): which of its code paths the allocations serve. */
  byOwnCode: { where: string; mb: number }[];
  /**
   * The allocating function in a library, with the innermost of the bot's frames above it, then the outermost
   * library frame below that: which of the bot's calls, through which library entry, allocate there (ioredis's
   * `Pipeline`, for one, is built per auto-pipelined tick and its cost depends on the connection), and the bot's
   * frame that called that innermost one.
   */
  bySiteAndCaller: { where: string; mb: number }[];
}

/** Allocation sampling running in another process (started with `--inspect=127.0.0.1:<port>`). */
export interface AllocationSampling {
  /** Stops sampling: what was allocated meanwhile, by function (self bytes), largest first. */
  stop(): Promise<AllocationSummary>;
}

/**
 * Starts V8's sampling heap profiler over the inspector protocol, counting objects the GC has since collected
 * too: what a process allocates (its garbage included), not only what it keeps.
 */
export async function startAllocationSampling(inspectPort: number): Promise<AllocationSampling> {
  const list = (await (await request(`http://127.0.0.1:${inspectPort}/json/list`)).body.json()) as {
    webSocketDebuggerUrl: string;
  }[];
  const url = list[0]?.webSocketDebuggerUrl;
  if (!url) throw new Error(`no inspector target on port ${inspectPort}`);
  const socket = new WebSocket(url);
  await new Promise((resolve, reject) => {
    socket.addEventListener('open', resolve, { once: true });
    socket.addEventListener('error', reject, { once: true });
  });
  let nextId = 1;
  const waiting = new Map<number, (result: unknown) => void>();
  socket.addEventListener('message', (event) => {
    const message = JSON.parse(String(event.data)) as { id?: number; result?: unknown };
    if (message.id !== undefined) waiting.get(message.id)?.(message.result);
  });
  const send = <T>(method: string, params: Record<string, unknown> = {}) =>
    new Promise<T>((resolve) => {
      const id = nextId++;
      waiting.set(id, resolve as (r: unknown) => void);
      socket.send(JSON.stringify({ id, method, params }));
    });
  await send('HeapProfiler.enable');
  await send('HeapProfiler.startSampling', {
    samplingInterval: 16_384,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  return {
    async stop() {
      const { profile } = await send<{ profile: { head: ProfileNode } }>('HeapProfiler.stopSampling');
      socket.close();
      const bySite = new Map<string, number>();
      const byOwn = new Map<string, number>();
      const bySiteAndCaller = new Map<string, number>();
      let total = 0;
      const walk = (node: ProfileNode, ownAbove: string, entry: string, ownCaller: string) => {
        const frame = node.callFrame;
        const own = !frame.url.includes('node_modules/') && frame.url.includes('/dist/src/');
        const file = own
          ? frame.url.replace(/^.*\/dist\//, 'dist/')
          : frame.url.replace(/^.*node_modules\//, '');
        const here = `${frame.functionName || '(anonymous)'} ${file}:${frame.lineNumber + 1}`;
        const ownHere = own ? here : ownAbove;
        // The bot's frame that called the innermost one (a helper such as LuaScript.run serves many callers).
        const callerHere = own ? ownAbove : ownCaller;
        // The first frame of a library under the bot's code: the call the bot made into it.
        const entryHere = own ? '' : entry || (frame.url.includes('node_modules/') ? here : '');
        if (node.selfSize > 0) {
          bySite.set(here, (bySite.get(here) ?? 0) + node.selfSize);
          byOwn.set(ownHere, (byOwn.get(ownHere) ?? 0) + node.selfSize);
          const via = entryHere && entryHere !== here ? `${entryHere} ← ` : '';
          const caller = callerHere && callerHere !== ownHere ? ` ← ${callerHere}` : '';
          const pair = here === ownHere ? `${here}${caller}` : `${here} ← ${via}${ownHere}${caller}`;
          bySiteAndCaller.set(pair, (bySiteAndCaller.get(pair) ?? 0) + node.selfSize);
          total += node.selfSize;
        }
        for (const child of node.children) walk(child, ownHere, entryHere, callerHere);
      };
      walk(profile.head, "(outside the bot's code)", '', '');
      const rank = (map: Map<string, number>) =>
        [...map]
          .sort((a, b) => b[1] - a[1])
          .slice(0, 40)
          .map(([where, bytes]) => ({ where, mb: Math.round((bytes / 1024 / 1024) * 100) / 100 }));
      return {
        totalMb: Math.round((total / 1024 / 1024) * 10) / 10,
        top: rank(bySite),
        byOwnCode: rank(byOwn),
        bySiteAndCaller: rank(bySiteAndCaller),
      };
    },
  };
}
