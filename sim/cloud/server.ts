/**
 * A simulator of the cloud service over plain node:http: the four documented operations with the spec's rules,
 * bearer auth, injectable faults, and a record of every call (for overlap and "sent once" checks). Controlled
 * in-process through {@link CloudSim} or from other processes under `/_sim/*`.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { z } from 'zod';
import { FaultBook, type SimFault, type SimRoute, simFaultSchema } from './faults.ts';
import { checkResize, checkRestore, DEFAULT_FIELD_NAMES, type SimFieldNames } from './rules.ts';
import {
  addClusterTo,
  buildState,
  DEFAULT_SEED,
  type SeedCluster,
  type SimSeed,
  type SimState,
  type SimVm,
  setPriceIn,
  stateToJson,
} from './state.ts';

export type { SimFault, SimRoute } from './faults.ts';
export { DEFAULT_FIELD_NAMES, SIM_REASONS, type SimFieldNames } from './rules.ts';
export type { SeedCluster, SeedProject, SeedVm, SimCluster, SimSeed, SimState, SimVm } from './state.ts';
export { DEFAULT_SEED } from './state.ts';

/** The key the simulator accepts unless told otherwise. */
export const DEFAULT_SIM_API_KEY = 'sim-key';

export interface CloudSimOptions {
  /** 0 (default) picks a free port. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  apiKey?: string;
  seed?: SimSeed;
  /** An external clock; without it the sim has its own movable clock starting at the wall time. */
  now?: () => Date;
  /** Names of the CPU class and private-network resize fields (default `cpu_type`, `private_network`). */
  fieldNames?: SimFieldNames;
  /** How far the `Date` header of every answer is from the wall clock (a server whose clock is off); default 0. */
  dateSkewMs?: number;
}

/** The sim's clock; `advance`/`set` throw when an external `now` was given. */
export interface SimClock {
  now(): Date;
  advance(ms: number): void;
  set(date: Date): void;
}

/** One request as received. `status` is undefined when the sim dropped or never answered it. */
export interface SimCall {
  route: SimRoute | 'unknown';
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** Parsed JSON when it parsed, else the raw text; undefined when empty. */
  body: unknown;
  status?: number;
  fault?: SimFault['kind'];
  /** Wall-clock milliseconds (performance.timeOrigin based), for overlap checks. */
  startMs: number;
  endMs?: number;
  /** The sim clock when the call arrived. */
  at: Date;
}

/** A mutation the sim made. */
export interface SimApplied {
  route: 'resize' | 'restore';
  projectUuid: string;
  vmid: number;
  backup?: string;
  body: unknown;
  taskId?: string;
  at: Date;
}

export interface CloudSim {
  url: string;
  port: number;
  apiKey: string;
  clock: SimClock;
  state: SimState;
  fieldNames: SimFieldNames;
  calls: SimCall[];
  applied: SimApplied[];
  /** Mutation calls that started while another one on the same VM was in flight. */
  readonly overlaps: number;
  fault(route: SimRoute, fault: SimFault): void;
  clearFaults(): void;
  setPrice(cluster: string, field: string, value: string): void;
  addCluster(cluster: SeedCluster): void;
  removeCluster(name: string): void;
  /** The live VM record; throws when there is none. */
  vm(projectUuid: string, vmid: number): SimVm;
  /** Clears calls, applied, overlaps and faults; the world stays as it is. */
  resetRecords(): void;
  /** From now on the `Date` header is `ms` off the wall clock (0: right). */
  skewDate(ms: number): void;
  close(): Promise<void>;
}

type Match =
  | { route: 'list' }
  | { route: 'getA'; name: string }
  | { route: 'getB'; name: string }
  | { route: 'resize'; project: string; vmid: string }
  | { route: 'restore'; project: string; vmid: string; backup: string };

interface Answer {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

const SEG = '([^/]+)';
const ROUTES: { route: SimRoute; method: string; pattern: RegExp }[] = [
  { route: 'list', method: 'GET', pattern: /^\/cloud\/cluster\/$/ },
  { route: 'getB', method: 'GET', pattern: new RegExp(`^/cloud/cluster/${SEG}/$`) },
  { route: 'getA', method: 'GET', pattern: new RegExp(`^/api/cloud/cluster/${SEG}/$`) },
  { route: 'resize', method: 'POST', pattern: new RegExp(`^/cloud/project/${SEG}/vm/${SEG}/upgrade/$`) },
  {
    route: 'restore',
    method: 'POST',
    pattern: new RegExp(`^/cloud/project/${SEG}/vm/${SEG}/backups/${SEG}/restore/$`),
  },
];

const NOT_FOUND = { detail: 'Not found.' };
const MAX_BODY = 1_000_000;

/** Starts the simulator; see {@link CloudSim}. */
export async function startCloudSim(options: CloudSimOptions = {}): Promise<CloudSim> {
  const apiKey = options.apiKey ?? DEFAULT_SIM_API_KEY;
  const fieldNames = options.fieldNames ?? DEFAULT_FIELD_NAMES;
  const clock = makeClock(options.now);
  const state = buildState(structuredClone(options.seed ?? DEFAULT_SEED), clock.now());
  const faults = new FaultBook();
  const calls: SimCall[] = [];
  const applied: SimApplied[] = [];
  const inFlight = new Map<string, number>();
  const sockets = new Set<Socket>();
  let overlaps = 0;
  let dateSkewMs = options.dateSkewMs ?? 0;

  const vmOf = (project: string, vmid: number): SimVm | undefined => state.projects.get(project)?.get(vmid);

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) send(res, { status: 500, body: { detail: `sim error: ${String(error)}` } });
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 10_000;
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (dateSkewMs !== 0) res.setHeader('date', new Date(Date.now() + dateSkewMs).toUTCString());
    const rawPath = (req.url ?? '/').split('?')[0] ?? '/';
    const text = await readBody(req);
    if (rawPath.startsWith('/_sim/')) return control(req, res, rawPath, text);

    const call: SimCall = {
      route: 'unknown',
      method: req.method ?? 'GET',
      path: rawPath,
      headers: req.headers,
      body: parseJson(text),
      startMs: performance.timeOrigin + performance.now(),
      at: clock.now(),
    };
    calls.push(call);
    res.on('close', () => {
      call.endMs = performance.timeOrigin + performance.now();
      if (res.headersSent) call.status = res.statusCode;
    });

    const found = matchRoute(rawPath);
    if (!found) return send(res, { status: 404, body: NOT_FOUND });
    call.route = found.route;
    if (found.method !== req.method) {
      return send(res, { status: 405, body: { detail: `Method "${req.method}" not allowed.` } });
    }

    // A mutation stays in flight for its whole handling, injected latency and hangs included.
    const key = 'project' in found.match ? `${found.match.project}/${found.match.vmid}` : undefined;
    if (key !== undefined) {
      const running = inFlight.get(key) ?? 0;
      if (running > 0) overlaps += 1;
      inFlight.set(key, running + 1);
    }
    try {
      await serve(req, res, found.match, call, text);
    } finally {
      if (key !== undefined) inFlight.set(key, (inFlight.get(key) ?? 1) - 1);
    }
  }

  async function serve(req: IncomingMessage, res: ServerResponse, match: Match, call: SimCall, text: string) {
    const fault = faults.take(match.route);
    call.fault = fault?.kind;
    if (fault?.kind === 'latency') await sleep(fault.ms);
    if (fault?.kind === 'status' && !fault.afterApply) return send(res, faultAnswer(fault));
    if (fault?.kind === 'drop' && fault.afterApply === false) return void res.destroy();
    if (fault?.kind === 'hang' && fault.afterApply === false) return hang(res, fault.ms, undefined);
    if (fault?.kind === 'body' && fault.afterApply === false) {
      return sendRaw(res, fault.status ?? 200, fault.contentType ?? 'text/plain; charset=utf-8', fault.body);
    }

    const answer = operate(match, req.headers.authorization, text);
    switch (fault?.kind) {
      case 'status':
        return send(res, faultAnswer(fault));
      case 'drop':
        return void res.destroy();
      case 'hang':
        return hang(res, fault.ms, answer);
      case 'body':
        return sendRaw(
          res,
          fault.status ?? 200,
          fault.contentType ?? 'text/plain; charset=utf-8',
          fault.body,
        );
      default:
        return send(res, answer);
    }
  }

  /** Runs one operation against the state; mutations are applied here. */
  function operate(match: Match, authorization: string | undefined, text: string): Answer {
    if (match.route !== 'list') {
      const denied = checkAuth(authorization, apiKey);
      if (denied) return denied;
    }
    if (match.route === 'list') {
      const list = [...state.clusters.values()].filter((c) => c.status === 'active');
      return { status: 200, body: list.map((c) => clusterBody(c, 'B')) };
    }
    if (match.route === 'getA' || match.route === 'getB') {
      const cluster = state.clusters.get(safeDecode(match.name) ?? '');
      if (cluster?.status !== 'active') {
        return { status: 404, body: { detail: 'No Cluster matches the given query.' } };
      }
      return { status: 200, body: clusterBody(cluster, match.route === 'getA' ? 'A' : 'B') };
    }

    const project = safeDecode(match.project) ?? '';
    const vmidText = safeDecode(match.vmid) ?? '';
    if (!state.projects.has(project)) return { status: 404, body: { detail: 'Project not found.' } };
    const vm = /^[1-9]\d{0,9}$/.test(vmidText) ? vmOf(project, Number(vmidText)) : undefined;
    if (!vm) return { status: 404, body: { detail: 'VM not found.' } };
    const body = parseJson(text);
    if (text.trim() !== '' && body === text) {
      return { status: 400, body: { detail: 'JSON parse error - the body is not valid JSON.' } };
    }
    const now = clock.now();

    if (match.route === 'resize') {
      const check = checkResize(vm, body, now, fieldNames);
      if (!check.ok) return { status: check.status, body: check.body };
      Object.assign(vm, check.changes);
      if (check.increased) vm.lastIncreaseAt = now;
      applied.push({ route: 'resize', projectUuid: project, vmid: vm.vmid, body, at: now });
      return { status: 200, body: { message: `Upgrade of VM ${vm.vmid} done.` } };
    }

    const backup = safeDecode(match.backup) ?? '';
    const check = checkRestore(vm, backup, body);
    if (!check.ok) return { status: check.status, body: check.body };
    const taskId = newTaskId(vm.vmid, now);
    vm.lastRestore = { backup, at: now, taskId };
    if (check.autostart) vm.power = 'running';
    applied.push({ route: 'restore', projectUuid: project, vmid: vm.vmid, backup, body, taskId, at: now });
    return {
      status: 202,
      body: { task_id: taskId, message: `Restore of VM ${vm.vmid} from ${backup} started.` },
    };
  }

  /** `/_sim/*`: the same control for other processes (demo, bench, child workers). */
  function control(req: IncomingMessage, res: ServerResponse, path: string, text: string) {
    const body = parseJson(text);
    const input = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
    try {
      if (req.method === 'GET' && path === '/_sim/state') {
        return send(res, {
          status: 200,
          body: {
            now: clock.now(),
            ...(stateToJson(state) as object),
            calls,
            applied,
            overlaps,
            faults: faults.toJSON(),
          },
        });
      }
      if (req.method !== 'POST') return send(res, { status: 404, body: NOT_FOUND });
      switch (path) {
        case '/_sim/fault': {
          if (input.clear === true) {
            faults.clear();
            return send(res, { status: 200, body: { ok: true } });
          }
          const parsed = z
            .object({ route: z.enum(['list', 'getB', 'getA', 'resize', 'restore']), fault: simFaultSchema })
            .parse(input);
          faults.add(parsed.route, parsed.fault);
          return send(res, { status: 200, body: { ok: true } });
        }
        case '/_sim/clock': {
          const parsed = z
            .union([
              z.object({ advanceMs: z.number() }),
              z.object({ set: z.string().refine((s) => !Number.isNaN(Date.parse(s))) }),
            ])
            .parse(input);
          if ('advanceMs' in parsed) clock.advance(parsed.advanceMs);
          else clock.set(new Date(parsed.set));
          return send(res, { status: 200, body: { now: clock.now() } });
        }
        case '/_sim/price': {
          const parsed = z.object({ cluster: z.string(), field: z.string(), value: z.string() }).parse(input);
          setPriceIn(state, parsed.cluster, parsed.field, parsed.value);
          return send(res, { status: 200, body: { ok: true } });
        }
        case '/_sim/cluster': {
          if (typeof input.remove === 'string') state.clusters.delete(input.remove);
          else
            addClusterTo(
              state,
              z
                .object({
                  add: z.looseObject({ name: z.string(), prices: z.record(z.string(), z.string()) }),
                })
                .parse(input).add as SeedCluster,
            );
          return send(res, { status: 200, body: { ok: true } });
        }
        case '/_sim/vm': {
          const parsed = vmPatchSchema.parse(input);
          const vm = vmOf(parsed.project, parsed.vmid);
          if (!vm) return send(res, { status: 404, body: { detail: 'VM not found.' } });
          const { project: _p, vmid: _v, createdAt, lastIncreaseAt, ...rest } = parsed;
          Object.assign(vm, rest);
          if (createdAt) vm.createdAt = new Date(createdAt);
          if (lastIncreaseAt) vm.lastIncreaseAt = new Date(lastIncreaseAt);
          return send(res, { status: 200, body: vm });
        }
        case '/_sim/reset':
          resetRecords();
          return send(res, { status: 200, body: { ok: true } });
        default:
          return send(res, { status: 404, body: NOT_FOUND });
      }
    } catch (error) {
      return send(res, {
        status: 400,
        body: { detail: error instanceof Error ? error.message : String(error) },
      });
    }
  }

  function resetRecords(): void {
    calls.length = 0;
    applied.length = 0;
    overlaps = 0;
    faults.clear();
  }

  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://${host}:${port}`,
    port,
    apiKey,
    clock,
    state,
    fieldNames,
    calls,
    applied,
    get overlaps() {
      return overlaps;
    },
    fault: (route, fault) => faults.add(route, fault),
    clearFaults: () => faults.clear(),
    setPrice: (cluster, field, value) => setPriceIn(state, cluster, field, value),
    addCluster: (cluster) => addClusterTo(state, cluster),
    removeCluster: (name) => {
      state.clusters.delete(name);
    },
    vm(projectUuid, vmid) {
      const vm = vmOf(projectUuid, vmid);
      if (!vm) throw new Error(`sim: no VM ${vmid} in project ${projectUuid}`);
      return vm;
    },
    resetRecords,
    skewDate: (ms) => {
      dateSkewMs = ms;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      }),
  };
}

const vmPatchSchema = z.object({
  project: z.string(),
  vmid: z.number().int(),
  power: z.enum(['running', 'stopped']).optional(),
  ha: z.boolean().optional(),
  cores: z.number().int().positive().optional(),
  ramGb: z.number().int().positive().optional(),
  osDiskGb: z.number().int().positive().optional(),
  cpuClass: z.string().optional(),
  wanMode: z.enum(['off', 'ipv4', 'ipv6', 'dual']).optional(),
  privateNetwork: z.string().optional(),
  createdAt: z.string().optional(),
  lastIncreaseAt: z.string().optional(),
  backups: z.array(z.string()).optional(),
});

function makeClock(external: (() => Date) | undefined): SimClock {
  if (external) {
    const refuse = () => {
      throw new Error('sim: the clock is external (options.now); move that clock instead');
    };
    return { now: external, advance: refuse, set: refuse };
  }
  let offsetMs = 0;
  return {
    now: () => new Date(Date.now() + offsetMs),
    advance: (ms) => {
      offsetMs += ms;
    },
    set: (date) => {
      offsetMs = date.getTime() - Date.now();
    },
  };
}

function matchRoute(path: string): { route: SimRoute; method: string; match: Match } | undefined {
  for (const { route, method, pattern } of ROUTES) {
    const m = pattern.exec(path);
    if (!m) continue;
    const [, a = '', b = '', c = ''] = m;
    const match: Match =
      route === 'list'
        ? { route }
        : route === 'getA' || route === 'getB'
          ? { route, name: a }
          : route === 'resize'
            ? { route, project: a, vmid: b }
            : { route, project: a, vmid: b, backup: c };
    return { route, method, match };
  }
  return undefined;
}

function checkAuth(header: string | undefined, apiKey: string): Answer | undefined {
  if (header === undefined || header.trim() === '') {
    return { status: 401, body: { detail: 'Authentication credentials were not provided.' } };
  }
  const m = /^Bearer ([^\s]+)$/.exec(header);
  if (!m) return { status: 401, body: { detail: 'Invalid token header. No credentials provided.' } };
  if (m[1] !== apiKey)
    return { status: 403, body: { detail: 'You do not have permission to perform this action.' } };
  return undefined;
}

function clusterBody(
  cluster: SimState['clusters'] extends Map<string, infer C> ? C : never,
  shape: 'A' | 'B',
) {
  const base = { name: cluster.name, description: cluster.description, location: cluster.location };
  return shape === 'A'
    ? { ...base, status: cluster.status, price_model: { ...cluster.pricesA }, ...cluster.extra }
    : { ...base, price_model: { ...cluster.pricesB }, ...cluster.extra };
}

function faultAnswer(fault: Extract<SimFault, { kind: 'status' }>): Answer & { raw?: string; type?: string } {
  const headers: Record<string, string> = {};
  if (fault.retryAfter !== undefined) headers['retry-after'] = String(fault.retryAfter);
  if (fault.body !== undefined) {
    return {
      status: fault.status,
      body: fault.body,
      headers,
      raw: fault.body,
      type: fault.contentType ?? 'text/plain',
    };
  }
  const detail =
    fault.status === 429
      ? 'Request was throttled.'
      : fault.status === 503
        ? 'Service temporarily unavailable.'
        : 'A server error occurred.';
  return { status: fault.status, body: { detail }, headers };
}

function send(res: ServerResponse, answer: Answer & { raw?: string; type?: string }) {
  if (answer.raw !== undefined) {
    for (const [k, v] of Object.entries(answer.headers ?? {})) res.setHeader(k, v);
    return sendRaw(res, answer.status, answer.type ?? 'text/plain', answer.raw);
  }
  const text = JSON.stringify(answer.body);
  res.writeHead(answer.status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...answer.headers,
  });
  res.end(text);
}

function sendRaw(res: ServerResponse, status: number, contentType: string, body: string): void {
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** Holds the answer: after `ms` the real answer is sent late; without `ms` only the client's giving up ends it. */
function hang(res: ServerResponse, ms: number | undefined, late: Answer | undefined): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer =
      ms === undefined
        ? undefined
        : setTimeout(() => {
            if (!res.destroyed) send(res, late ?? { status: 504, body: { detail: 'Gateway timeout.' } });
            resolve();
          }, ms);
    res.on('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) break;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function parseJson(text: string): unknown {
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

function safeDecode(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A task id like Proxmox's UPID, which the restore answer carries. */
function newTaskId(vmid: number, now: Date): string {
  const hex = (n: number, width: number) => n.toString(16).toUpperCase().padStart(width, '0');
  const seconds = Math.floor(now.getTime() / 1000);
  return `UPID:sim-node1:${hex(process.pid, 8)}:${randomBytes(4).toString('hex').toUpperCase()}:${hex(seconds, 8)}:qmrestore:${vmid}:api@sim:`;
}
