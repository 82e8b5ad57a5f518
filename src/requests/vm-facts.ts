import type { Cluster, Redis } from 'ioredis';
import { findProject, type Policy, type ProjectPolicy, type VmPolicyFacts } from '../config/policy.ts';
import { isIncrease } from '../rules/resize.ts';
import type { ResizeTarget, VmKnown } from '../rules/types.ts';
import type { CloudRequest } from './model/types.ts';
import { LuaScript } from './store/lua.ts';

/** What the bot itself applied to a VM (docs/requests.md#the-rules): the last size it set and its last increase. */
export interface RecordedVmFacts extends ResizeTarget {
  /** The last time the bot increased cores, RAM or CPU class. */
  lastIncreaseAt?: Date;
  /** The last time the bot applied anything to this VM. */
  appliedAt?: Date;
}

const NUMBER_FIELDS = ['cores', 'ramGb', 'osDiskGb'] as const;
const TEXT_FIELDS = ['cpuClass', 'wanMode', 'privateNetwork'] as const;

/**
 * Merges applied fields into the VM's hash; `lastIncreaseAt` only moves forward, so two workers recording out of
 * order keep the later increase. `args` from index `from`: at ISO, at ms, increased ('1'|'0'), then field/value
 * pairs ({@link VmFactsWrite}). A Lua function, so the request's compare-and-set can run it in the same script.
 */
export const RECORD_VM_LUA = `
local function record_vm(key, args, from)
  for i = from + 3, #args, 2 do redis.call('HSET', key, args[i], args[i + 1]) end
  redis.call('HSET', key, 'appliedAt', args[from])
  if args[from + 2] == '1' then
    local previous = redis.call('HGET', key, 'lastIncreaseAtMs')
    if not previous or tonumber(previous) < tonumber(args[from + 1]) then
      redis.call('HSET', key, 'lastIncreaseAt', args[from], 'lastIncreaseAtMs', args[from + 1])
    end
  end
end
`;

/** KEYS: vm hash. ARGV: {@link VmFactsWrite.args}. */
const RECORD = new LuaScript(`${RECORD_VM_LUA}
record_vm(KEYS[1], ARGV, 1)
return 1
`);

/** A record of what the bot applied to a VM, written by {@link RECORD_VM_LUA} here or inside another script. */
export interface VmFactsWrite {
  /** The VM's hash. */
  key: string;
  /** at ISO, at ms, increased ('1' | '0'), then field/value pairs. */
  args: string[];
}

/** What the bot recorded, from the VM's hash as HGETALL answers it; undefined for an empty hash. */
export function recordedFacts(hash: Record<string, string>): RecordedVmFacts | undefined {
  if (Object.keys(hash).length === 0) return undefined;
  const facts: RecordedVmFacts = {};
  for (const field of NUMBER_FIELDS) {
    const value = hash[field];
    if (value !== undefined && Number.isFinite(Number(value))) facts[field] = Number(value);
  }
  if (hash.cpuClass === 'regular' || hash.cpuClass === 'light') facts.cpuClass = hash.cpuClass;
  if (
    hash.wanMode === 'off' ||
    hash.wanMode === 'ipv4' ||
    hash.wanMode === 'ipv6' ||
    hash.wanMode === 'dual'
  ) {
    facts.wanMode = hash.wanMode;
  }
  if (hash.privateNetwork === 'off' || hash.privateNetwork === 'on')
    facts.privateNetwork = hash.privateNetwork;
  if (hash.lastIncreaseAt) facts.lastIncreaseAt = new Date(hash.lastIncreaseAt);
  if (hash.appliedAt) facts.appliedAt = new Date(hash.appliedAt);
  return facts;
}

/** Per project and VM, in Redis: what the bot applied, for the rules and the modal's "from" values. */
export class VmFactsStore {
  private readonly prefix: string;

  constructor(
    private readonly redis: Redis | Cluster,
    options: { prefix: string },
  ) {
    this.prefix = options.prefix;
  }

  /** The VM's hash: read by the VM lock's script with the lock, written with the request's success. */
  key(projectUuid: string, vmid: number): string {
    return `${this.prefix}:vm:${projectUuid.toLowerCase()}:${vmid}`;
  }

  /** What the bot recorded for this VM, or undefined when it never applied anything to it. */
  async get(projectUuid: string, vmid: number): Promise<RecordedVmFacts | undefined> {
    return recordedFacts(await this.redis.hgetall(this.key(projectUuid, vmid)));
  }

  /**
   * What is known of this VM now: the policy file's facts with what the bot applied laid over them. The one
   * answer to "what do we know of this VM" for the modal, the rules, scheduled runs and the CLI.
   */
  async known(project: Pick<ProjectPolicy, 'uuid' | 'vms'>, vmid: number): Promise<VmKnown> {
    const recorded = await this.get(project.uuid, vmid);
    return knownVm(
      project.vms.find((v) => v.vmid === vmid),
      recorded,
      vmid,
    );
  }

  /** What is known of the request's VM now: the policy's facts overlaid with what the bot applied. */
  async knownFor(
    policy: Policy,
    request: Pick<CloudRequest, 'projectUuid' | 'projectName' | 'vmid'>,
  ): Promise<VmKnown> {
    return knownForRequest(policy, request, await this.get(request.projectUuid, request.vmid));
  }

  /**
   * Records a resize step the API applied, the same way whether its answer said so or a person resolved an unknown
   * outcome as applied: the sizes, and the time of an increase (which starts the 24-hour wait before lowering).
   * `known` is what the bot knew of the VM just before the step; what it knew when the request was made fills gaps.
   */
  async recordStep(request: CloudRequest, step: ResizeTarget, known: VmKnown, at: Date): Promise<void> {
    await this.write(this.stepWrite(request, step, known, at));
  }

  /**
   * The record {@link recordStep} writes, for the request's own compare-and-set to write in the same script (the
   * worker's success and what it applied cannot part).
   */
  stepWrite(request: CloudRequest, step: ResizeTarget, known: VmKnown, at: Date): VmFactsWrite {
    const planned = request.params.kind === 'resize' ? request.params.before : undefined;
    const increased = isIncrease(step, {
      cores: known.cores ?? planned?.cores,
      ramGb: known.ramGb ?? planned?.ramGb,
      cpuClass: known.cpuClass ?? planned?.cpuClass,
    });
    return { key: this.key(request.projectUuid, request.vmid), args: appliedArgs(step, at, increased) };
  }

  /** Writes a record made by {@link stepWrite} on its own. */
  async write(record: VmFactsWrite): Promise<void> {
    await RECORD.run(this.redis, [record.key], record.args);
  }

  /** Records a size the API accepted, atomically; `increased` marks an increase of cores, RAM or CPU class. */
  async recordApplied(
    projectUuid: string,
    vmid: number,
    applied: ResizeTarget,
    at: Date,
    increased: boolean,
  ): Promise<void> {
    await RECORD.run(this.redis, [this.key(projectUuid, vmid)], appliedArgs(applied, at, increased));
  }
}

/** {@link VmFactsWrite.args} of an applied size. */
function appliedArgs(applied: ResizeTarget, at: Date, increased: boolean): string[] {
  const args = [at.toISOString(), String(at.getTime()), increased ? '1' : '0'];
  for (const field of [...NUMBER_FIELDS, ...TEXT_FIELDS]) {
    const value = applied[field];
    if (value !== undefined) args.push(field, String(value));
  }
  return args;
}

/** What is known of the request's VM: the policy's facts with `recorded` (what the bot applied) laid over them. */
export function knownForRequest(
  policy: Policy,
  request: Pick<CloudRequest, 'projectUuid' | 'projectName' | 'vmid'>,
  recorded: RecordedVmFacts | undefined,
): VmKnown {
  const project = findProject(policy, request.projectUuid) ?? findProject(policy, request.projectName);
  return knownVm(
    project?.vms.find((v) => v.vmid === request.vmid),
    recorded,
    request.vmid,
  );
}

/**
 * What is known of a VM: the policy file's facts (snake_case, `created_at` as ISO) with what the bot recorded laid
 * over them, since the bot's own changes are newer than the file.
 */
export function knownVm(
  policyFacts: VmPolicyFacts | undefined,
  recorded: RecordedVmFacts | undefined,
  vmid: number,
): VmKnown {
  const known: VmKnown = { vmid, ha: policyFacts?.ha ?? false };
  const set = <K extends keyof VmKnown>(key: K, value: VmKnown[K] | undefined) => {
    if (value !== undefined) known[key] = value;
  };
  set('name', policyFacts?.name);
  set('cores', recorded?.cores ?? policyFacts?.cores);
  set('ramGb', recorded?.ramGb ?? policyFacts?.ram_gb);
  set('osDiskGb', recorded?.osDiskGb ?? policyFacts?.os_disk_gb);
  set('cpuClass', recorded?.cpuClass ?? policyFacts?.cpu_class);
  set('wanMode', recorded?.wanMode ?? policyFacts?.wan_mode);
  set('privateNetwork', recorded?.privateNetwork ?? policyFacts?.private_network);
  set('createdAt', policyFacts?.created_at ? new Date(policyFacts.created_at) : undefined);
  set('lastIncreaseAt', recorded?.lastIncreaseAt);
  return known;
}
