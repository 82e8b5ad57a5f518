import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { cloudReason } from '../cloud/errors.ts';
import type { PriceSource } from '../cloud/price-cache.ts';
import type { Cluster } from '../cloud/types.ts';
import type { AgentMay, AgentPolicy } from '../config/agents.ts';
import { findProject, type Policy, type ProjectPolicy } from '../config/policy.ts';
import type { Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import { agentBoundRefusal } from '../requests/approval/agent-bound.ts';
import type { RequestLifecycle } from '../requests/lifecycle/request-lifecycle.ts';
import type { CheckedResize, Origin } from '../requests/lifecycle/types.ts';
import { type CloudRequest, FINAL_STATES } from '../requests/model/types.ts';
import { checkResizeUnder } from '../requests/resize-check.ts';
import type { RequestStore } from '../requests/store/store.ts';
import { resizeKinds } from '../requests/tickets.ts';
import { knownVm, type VmFactsStore } from '../requests/vm-facts.ts';
import { approvalKind, classifyChange, scopeRefusal } from '../rules/change-scope.ts';
import { checkLease } from '../rules/lease.ts';
import { formatUtc } from '../rules/resize.ts';
import { checkRestore } from '../rules/restore.ts';
import type { ResizeTarget, VmKnown } from '../rules/types.ts';
import type { AgentControls } from './agent-state.ts';
import { answer, cancelRefusalText, disabledRefusal, refusal, requestText, requestView } from './answers.ts';
import { askOnceFor } from './ask-once.ts';
import type { INPUTS, ToolArgs } from './inputs.ts';
import type { RequestChanges } from './request-changes.ts';

/** What the tools need: the same lifecycle, store and prices as the Slack side. */
export interface McpDeps {
  policy: Policy;
  store: RequestStore;
  requests: RequestLifecycle;
  vmFacts: VmFactsStore;
  prices: PriceSource;
  controls: AgentControls;
  changes: RequestChanges;
  now: () => Date;
  logger: Logger;
  metrics: Metrics;
}

/** A tool's handler for one agent; a thrown error becomes a tool error saying nothing was done. */
export type Handler<K extends keyof typeof INPUTS> = (
  args: ToolArgs<K>,
  signal: AbortSignal,
) => Promise<CallToolResult>;

/** The tools' handlers for `agent`. */
export function agentTools(deps: McpDeps, agent: AgentPolicy): { [K in keyof typeof INPUTS]: Handler<K> } {
  const { policy } = deps;
  const projectFor = (name: string): ProjectPolicy | string => {
    const project = findProject(policy, name);
    const allowed = agent.projects.map((p) => p.toLowerCase());
    if (
      !project ||
      !(allowed.includes(project.name.toLowerCase()) || allowed.includes(project.uuid.toLowerCase()))
    )
      return `Agent ${agent.name} may not ask in project “${name.slice(0, 64)}”; it may ask in: ${agent.projects.join(', ') || 'no project'}.`;
    return project;
  };
  const mayNot = (what: AgentMay): string | undefined =>
    agent.may.includes(what)
      ? undefined
      : `Agent ${agent.name} may not ask for ${WHAT[what]}; it may ask for: ${agent.may.map((m) => WHAT[m]).join(', ')}.`;
  const vmOf = async (project: ProjectPolicy, vmid: number): Promise<VmKnown> =>
    knownVm(
      project.vms.find((v) => v.vmid === vmid),
      await deps.vmFacts.get(project.uuid, vmid),
      vmid,
    );
  const origin = (project: ProjectPolicy): Origin => ({
    user: agent.on_behalf_of,
    teamId: policy.workspace ?? '',
    // An agent's request is posted in the project's first channel.
    channel: project.channels[0] ?? '',
    agent: {
      name: agent.name,
      unattended: agent.unattended,
      maxMonthlyDelta: agent.max_monthly_delta,
      verify: agent.verify,
    },
  });
  /** The resize checked by the rules, with its lease; or the sentences a person would read. */
  const checkedResize = async (
    args: ToolArgs<'plan_resize'>,
    project: ProjectPolicy,
  ): Promise<{ resize: CheckedResize } | { refused: string[]; scope?: true }> => {
    const vm = await vmOf(project, args.vm_id);
    const target: ResizeTarget = {};
    if (args.cores !== undefined) target.cores = args.cores;
    if (args.ram_gb !== undefined) target.ramGb = args.ram_gb;
    if (args.os_disk_gb !== undefined) target.osDiskGb = args.os_disk_gb;
    if (args.cpu_class !== undefined) target.cpuClass = args.cpu_class;
    if (args.wan !== undefined) target.wanMode = args.wan;
    if (args.private_network !== undefined) target.privateNetwork = args.private_network;
    const now = deps.now();
    const check = checkResizeUnder(policy, {
      vm,
      target,
      confirmedStopped: args.vm_stopped,
      // As a workflow step: the agent asks for the target mode; the message shows the two steps to the approvers.
      acceptWanTwoStep: true,
      now,
    });
    if (Object.keys(target).length === 0)
      return {
        refused: [
          'Nothing to change: give at least one of cores, ram_gb, os_disk_gb, cpu_class, wan, private_network.',
        ],
      };
    // Every field against the agent's `may`: a change that raises anything is not a decrease, an unknown direction neither.
    const outOfScope = scopeRefusal(classifyChange(vm, target), agent.may, `Agent ${agent.name}`);
    if (outOfScope) return { refused: [outOfScope], scope: true };
    const term = args.for_hours !== undefined ? { hours: args.for_hours } : undefined;
    const lease = term ? checkLease({ vm, check, term, now }) : undefined;
    const violations = [
      // A lease never waits for the 24-hour rule: only the rules' other refusals stand beside the lease's.
      ...(lease ? check.violations.filter((v) => v.code !== 'cooldown') : check.violations),
      ...(lease?.violations ?? []),
    ];
    if (violations.length > 0) {
      const refused = violations.map((v) => v.message);
      if (check.cooldownOnly && check.earliestAllowedAt && !lease)
        refused.push(`Ask again from ${formatUtc(check.earliestAllowedAt)}.`);
      return { refused };
    }
    return {
      resize: {
        project,
        vm,
        target,
        check,
        confirmedStopped: args.vm_stopped,
        ...(term && lease ? { lease: { term, returnTo: lease.returnTo }, leaseNotes: lease.notes } : {}),
      },
    };
  };
  /** A request of this agent's projects, or why not. */
  const readable = async (id: string): Promise<CloudRequest | string> => {
    const request = await deps.store.get(id);
    const notFound = `There is no request ${id} that agent ${agent.name} may see.`;
    if (!request) return notFound;
    const project = projectFor(request.projectName);
    return typeof project === 'string' ? notFound : request;
  };
  const created = (request: CloudRequest): CallToolResult =>
    answer(
      // Posting is a job of its own, retried while Slack fails: the answer cannot say it is there yet.
      `${requestText(request)} ${request.messageTs ? 'It was posted' : 'It is being posted'} in the project's Slack channel (get_request says posted: true once it is there); follow it with get_request (wait_seconds up to 60).`,
      requestView(request),
    );
  const askOnce = askOnceFor(deps, agent, created);

  return {
    async list_clusters() {
      let clusters: Cluster[];
      try {
        clusters = await deps.prices.clusters();
      } catch (error) {
        return refusal(`The cluster list could not be read: ${cloudReason(error)}.`);
      }
      const lines = clusters.map(
        (c) =>
          `${c.name} (${c.location}): vCore regular ${c.prices.vcoreRegular ?? '?'}/h, vCore light ${c.prices.vcoreLight ?? '?'}/h, RAM ${c.prices.ram ?? '?'}/GB/h, storage ${c.prices.storageFast ?? '?'}/GB/h, public IP ${c.prices.publicIp ?? '?'}/h`,
      );
      return answer(
        lines.length > 0
          ? `Active clusters (${policy.currency}):\n${lines.join('\n')}`
          : 'No active clusters.',
        { currency: policy.currency, clusters: clusters.map(clusterView) },
      );
    },
    async get_cluster(args) {
      const name = args.name.slice(0, 64);
      let cluster: Cluster | undefined;
      try {
        // From the price cache: the list holds every active cluster, so an agent's reads cost the API nothing more.
        cluster = (await deps.prices.clusters()).find((c) => c.name === args.name);
      } catch (error) {
        return refusal(`Cluster “${name}” could not be read: ${cloudReason(error)}.`);
      }
      if (!cluster) return refusal(`There is no active cluster “${name}”; list_clusters names them.`);
      // The API lists active clusters only.
      const view = { ...clusterView(cluster), status: cluster.status ?? 'active' };
      return answer(
        `${cluster.name} (${cluster.location})${cluster.status ? `, ${cluster.status}` : ''}: ${JSON.stringify(view.prices)}`,
        { currency: policy.currency, cluster: view },
      );
    },
    async list_vms(args) {
      const project = projectFor(args.project);
      if (typeof project === 'string') return refusal(project);
      const vms = await Promise.all(project.vms.map((v) => vmOf(project, v.vmid)));
      const views = vms.map((vm) => ({
        vm_id: vm.vmid,
        ...(vm.name ? { name: vm.name } : {}),
        ha: vm.ha,
        cores: vm.cores ?? null,
        ram_gb: vm.ramGb ?? null,
        os_disk_gb: vm.osDiskGb ?? null,
        cpu_class: vm.cpuClass ?? null,
        wan: vm.wanMode ?? null,
        private_network: vm.privateNetwork ?? null,
      }));
      const lines = views.map(
        (v) =>
          `VM ${v.vm_id}${v.name ? ` (${v.name})` : ''}: ${v.cores ?? '?'} cores, ${v.ram_gb ?? '?'} GB RAM, ${v.os_disk_gb ?? '?'} GB disk, WAN ${v.wan ?? '?'}${v.ha ? ', HA' : ''}`,
      );
      return answer(
        `VMs of ${project.name} that the bot knows of (the API cannot list VMs; others may exist):\n${lines.join('\n') || 'none listed'}`,
        { project: project.name, vms: views },
      );
    },
    async plan_resize(args) {
      const project = projectFor(args.project);
      if (typeof project === 'string') return refusal(project);
      const checked = await checkedResize(args, project);
      const notAllowed = args.for_hours !== undefined ? mayNot('lease') : undefined;
      if ('refused' in checked || notAllowed) {
        const refused = [
          ...('refused' in checked ? checked.refused : []),
          ...(notAllowed ? [notAllowed] : []),
        ];
        return answer(`Would be refused: ${refused.join(' ')} Nothing was created.`, {
          allowed: false,
          refused,
          created: false,
        });
      }
      const preview = await deps.requests.previewResize(origin(project), checked.resize);
      const { check } = checked.resize;
      const cost = preview.cost;
      // What request_resize would refuse before anything exists, the plan says too.
      const overBound = agentBoundRefusal(
        { name: agent.name, maxMonthlyDelta: agent.max_monthly_delta },
        cost?.diffMonthly,
        policy.currency,
      );
      if (overBound)
        return answer(`Would be refused: ${overBound} Nothing was created.`, {
          allowed: false,
          refused: [overBound],
          created: false,
        });
      const costText = cost
        ? `Cost after: ${cost.currency} ${cost.hourly}/h, ${cost.currency} ${cost.monthly}/month${cost.diffMonthly !== undefined ? ` (${cost.diffMonthly.startsWith('-') ? '' : '+'}${cost.diffMonthly}/month)` : ''}.`
        : (preview.costNote ?? 'Cost not shown.');
      const approval = preview.approval;
      return answer(
        [
          `Allowed by the rules: ${check.steps.length} step${check.steps.length === 1 ? '' : 's'}.`,
          ...check.notes,
          ...(checked.resize.leaseNotes ?? []),
          costText,
          `It would need ${approval.count} approval${approval.count === 1 ? '' : 's'} in Slack (${approval.rule}).`,
          'Nothing was created.',
        ].join(' '),
        {
          allowed: true,
          created: false,
          kind: approvalKind(classifyChange(checked.resize.vm, checked.resize.target)),
          steps: check.steps,
          notes: [...check.notes, ...(checked.resize.leaseNotes ?? [])],
          cost: cost ?? null,
          cost_note: preview.costNote ?? null,
          approval: { needed: approval.count, rule: approval.rule },
        },
      );
    },
    async request_resize(args) {
      const project = projectFor(args.project);
      if (typeof project === 'string') return refusal(project);
      const checked = await checkedResize(args, project);
      // What the agent may not ask for at all is said before the rules' own refusals.
      if ('scope' in checked) return refusal(checked.refused.join(' '));
      const notAllowed = args.for_hours !== undefined ? mayNot('lease') : undefined;
      if (notAllowed) return refusal(notAllowed);
      if ('refused' in checked) return refusal(checked.refused.join(' '));
      const resize = checked.resize;
      // Identical is the change planned, not the words of the ask: a field named at the size it has changes nothing.
      const change = {
        tool: 'request_resize',
        project: project.uuid,
        vm_id: args.vm_id,
        steps: resize.check.steps,
        for_hours: args.for_hours,
      };
      return askOnce({ ...change, ticket: args.ticket }, args.idempotency_key, async () => {
        const kinds = resizeKinds(resize.vm, resize.target);
        const ticket = await deps.requests.checkTicket(project, kinds, args.ticket);
        return deps.requests.createResize(origin(project), { ...resize, reason: args.reason, ticket });
      });
    },
    async request_restore(args) {
      const project = projectFor(args.project);
      if (typeof project === 'string') return refusal(project);
      const notAllowed = mayNot('restore');
      if (notAllowed) return refusal(notAllowed);
      const vm = await vmOf(project, args.vm_id);
      const violations = checkRestore({
        vm,
        vmid: args.vm_id,
        // The agent names the VM once, in vm_id: there is no form to type it again in.
        typedVmid: String(args.vm_id),
        backupSlug: args.backup,
        autostart: args.autostart,
        confirmedStopped: args.vm_stopped,
      });
      if (violations.length > 0) return refusal(violations.map((v) => v.message).join(' '));
      const change = {
        tool: 'request_restore',
        project: project.uuid,
        vm_id: args.vm_id,
        backup: args.backup,
        autostart: args.autostart,
        ticket: args.ticket,
      };
      return askOnce(change, args.idempotency_key, async () => {
        const ticket = await deps.requests.checkTicket(project, ['restore'], args.ticket);
        return deps.requests.createRestore(origin(project), {
          project,
          vm,
          backupSlug: args.backup,
          autostart: args.autostart,
          reason: args.reason,
          ticket,
        });
      });
    },
    async get_request(args, signal) {
      const found = await readable(args.request_id);
      if (typeof found === 'string') return refusal(found);
      let request = found;
      const waitMs = Math.round((args.wait_seconds ?? 0) * 1000);
      if (waitMs > 0 && !FINAL_STATES.includes(request.state)) {
        const from = request.state;
        let disabled = false;
        await deps.changes.waitFor(
          request.id,
          async () => {
            // An admin's disable ends the wait at once (the change tail wakes every wait on an agent's entry).
            disabled = await deps.controls.isDisabled(agent.name);
            if (disabled) return true;
            const now = await deps.store.get(request.id);
            if (now) request = now;
            return !now || now.state !== from;
          },
          waitMs,
          signal,
        );
        if (disabled) return disabledRefusal(agent.name);
      }
      return answer(requestText(request), requestView(request));
    },
    async cancel_request(args) {
      const found = await readable(args.request_id);
      if (typeof found === 'string') return refusal(found);
      const decided = await deps.requests.cancelByAgent(found, agent.name);
      if (!decided.ok) {
        const text =
          decided.refusal.code === 'not_requester'
            ? `Agent ${agent.name} may cancel only the requests it made; request ${found.id} is not one of them.`
            : cancelRefusalText(decided.refusal, found);
        return refusal(text);
      }
      return answer(
        `${requestText(decided.request)} Nothing was sent to the API.`,
        requestView(decided.request),
      );
    },
  };
}

const WHAT: Record<AgentMay, string> = {
  resize_up: 'increases (resize_up)',
  resize_down: 'decreases (resize_down)',
  restore: 'restores (restore)',
  lease: 'temporary changes (lease)',
};

function clusterView(cluster: Cluster) {
  const { other, ...known } = cluster.prices;
  return {
    name: cluster.name,
    location: cluster.location,
    description: cluster.description,
    ...(cluster.status ? { status: cluster.status } : {}),
    prices: { ...known, ...other },
  };
}
