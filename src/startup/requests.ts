/**
 * The approval policy, the request store and the lifecycle on one Redis connection, built the same way wherever
 * requests are made or decided, so a new dependency of the lifecycle reaches every surface.
 */

import { createPriceCache } from '../cloud/price-cache.ts';
import type { CloudApi } from '../cloud/types.ts';
import type { Policy } from '../config/policy.ts';
import type { RedisClient } from '../config/redis-connection.ts';
import type { SealKeys } from '../config/seal-keys.ts';
import { createOutbox } from '../jobs/outbox.ts';
import type { Queues } from '../jobs/queues.ts';
import { AgentControls } from '../mcp/agent-state.ts';
import type { Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import { createApprovalPolicy, type UserGroups } from '../requests/approval/approvers.ts';
import type { AuditContext } from '../requests/audit/append.ts';
import { RequestLifecycle } from '../requests/lifecycle/request-lifecycle.ts';
import type { LifecycleDeps } from '../requests/lifecycle/types.ts';
import { RequestStore } from '../requests/store/store.ts';
import { VmFactsStore } from '../requests/vm-facts.ts';
import type { TicketDesk } from '../tickets/desk.ts';

export function openRequests(parts: {
  redis: RedisClient;
  queues: Queues;
  cloud: CloudApi;
  policy: Policy;
  prefix: string;
  now: () => Date;
  logger: Logger;
  metrics: Metrics;
  /** Scrubbed from what people and agents type. */
  secrets: string[];
  /** Seals and checks decisions (SEAL_KEY). */
  sealKeys?: SealKeys;
  /** Who is in the policy's user groups (Slack's usergroups.users.list); without it only listed users count. */
  userGroups?: UserGroups;
  /** Seals the audit entries and names the policy version in them. */
  audit?: AuditContext;
  /** The change-ticket systems the environment configures (docs/configuration.md#change-tickets). */
  tickets?: TicketDesk;
}) {
  const { redis, queues, policy, prefix, now } = parts;
  const store = new RequestStore(redis, {
    prefix,
    now,
    retentionDays: policy.retention_days,
    auditRetentionDays: () => policy.audit_retention_days,
    audit: parts.audit,
  });
  const vmFacts = new VmFactsStore(redis, { prefix });
  const prices = createPriceCache(parts.cloud);
  const approvals = createApprovalPolicy(policy, parts.userGroups);
  const lifecycleDeps: LifecycleDeps = {
    policy,
    store,
    outbox: createOutbox(queues, now),
    approvals,
    prices,
    now,
    logger: parts.logger,
    metrics: parts.metrics,
    vmFacts,
    secrets: parts.secrets,
    ...(parts.sealKeys ? { sealKeys: parts.sealKeys } : {}),
    ...(parts.tickets ? { tickets: parts.tickets } : {}),
    agentDisabled: (name) => new AgentControls(redis, prefix, now, parts.audit).isDisabled(name),
    // A person's requests are counted as an agent's asks are, under a name no agent can have (`:` is not allowed).
    takeRequest: (user, perHour) => new AgentControls(redis, prefix, now).takeAsk(`person:${user}`, perHour),
  };
  return { approvals, store, vmFacts, prices, lifecycleDeps, requests: new RequestLifecycle(lifecycleDeps) };
}
