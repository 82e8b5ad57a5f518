/**
 * The worker role: the execute and notify workers (a request's API calls and its replies), the App Home refresh,
 * the workflow steps' completion, the sweepers, the index backfill and the digest worker.
 */
import { createExecution } from '../jobs/execution.ts';
import { startHomeRefresh } from '../jobs/home.ts';
import { ReplicaAck } from '../jobs/replica-ack.ts';
import { startRetentionSweeper } from '../jobs/retention-sweeper.ts';
import { startStrandedSweeper } from '../jobs/stranded-sweeper.ts';
import { startStepCompletion } from '../jobs/workflow-steps.ts';
import { AgentControls } from '../mcp/agent-state.ts';
import { startHomeBackfill } from '../requests/home-backfill.ts';
import { VmFactsStore } from '../requests/vm-facts.ts';
import { homeRenderer } from '../slack/blocks/home.ts';
import { createRequestRenderer } from '../slack/blocks/request-message.ts';
import { startAuditExport } from './audit-export.ts';
import type { Core } from './core.ts';

/** Starts the workers over the core; each registers its stop with the shutdown stages. */
export function startWorker(core: Core): void {
  const {
    queueRedis: connection,
    recordsRedis: records,
    prefix,
    workerStore: store,
    now,
    logger,
    options,
    stages,
  } = core;
  const homes = startHomeRefresh({
    connection,
    records,
    prefix,
    store,
    approvals: core.approvals,
    renderer: homeRenderer,
    digestOf: (channel) => core.digests.scheduler.get(channel),
    groupsOf: core.groupsOf,
    groups: core.userGroups,
    slack: core.slack,
    now,
    logger,
    rate: options.homeRate,
  });
  // Requests stored before the App Home's indexes are added to them once, in the background.
  const backfill = startHomeBackfill(connection, prefix, logger);
  stages.intake.push(() => backfill.stop());
  const steps = startStepCompletion({ connection, prefix, store, slack: core.slack, logger });
  const agentControls = new AgentControls(records, prefix, now);
  const execution = createExecution({
    connection: core.jobsRedis,
    prefix,
    store,
    requests: core.workerRequests,
    records,
    vmFacts: new VmFactsStore(records, { prefix }),
    cloud: core.cloud,
    prices: core.prices,
    policy: core.policy,
    approvals: core.approvals,
    sealKeys: core.sealKeys,
    queues: core.queues,
    now,
    logger,
    metrics: core.metrics,
    slack: core.slack,
    tickets: core.tickets,
    renderer: createRequestRenderer(),
    // A change reaches the App Homes of those it concerns and completes the workflow step that asked for it.
    followUps: {
      changed: async (request) => void (await Promise.all([homes.changed(request), steps.changed(request)])),
    },
    stalledIntervalMs: options.stalledIntervalMs,
    concurrency: options.concurrency,
    vmLock: options.vmLock,
    ticketRetryMs: options.ticketRetryMs,
    // With Sentinels, what a POST or a Slack reply depends on waits for a replica (src/jobs/replica-ack.ts).
    replicaAck: new ReplicaAck(records, core.replicas?.current),
    // Read right before each POST: a disabled agent's approved work does not run.
    agentDisabled: (name) => agentControls.isDisabled(name),
  });
  // The sweepers stop with the intake: they would otherwise enqueue into queues that are closing.
  const sweeper = startStrandedSweeper(
    {
      store,
      queues: core.queues,
      now,
      logger,
      queueApproved: (request, detail) => core.requests.queueApproved(request, detail),
    },
    options.sweepPolicy,
  );
  stages.intake.push(() => sweeper.stop());
  const retention = startRetentionSweeper({ store, queues: core.queues, logger }, options.retentionPolicy);
  stages.intake.push(() => retention.stop());
  // The home refresh and step completion after the notify worker that feeds them.
  stages.work.push(async (budget) => {
    await execution.close(budget);
    await Promise.all([homes.close(), steps.close()]);
  });
  const digestWorker = core.digests.startWorker();
  stages.work.push(() => digestWorker.close());
  startAuditExport(core);
}
