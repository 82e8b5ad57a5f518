import type { CloudApiClient } from '../../src/cloud/client.ts';
import { createPriceCache } from '../../src/cloud/price-cache.ts';
import type { Policy } from '../../src/config/policy.ts';
import { createOutbox } from '../../src/jobs/outbox.ts';
import type { Queues } from '../../src/jobs/queues.ts';
import type { Logger } from '../../src/observability/logger.ts';
import type { Metrics } from '../../src/observability/metrics.ts';
import { createApprovalPolicy } from '../../src/requests/approval/approvers.ts';
import { RequestLifecycle } from '../../src/requests/lifecycle/request-lifecycle.ts';
import type { RequestStore } from '../../src/requests/store/store.ts';
import type { VmFactsStore } from '../../src/requests/vm-facts.ts';
import { TEST_SEAL_KEYS } from './seal.ts';

/**
 * The lifecycle the workers get in `src/main.ts` (outbox on the queues, the policy's approvers, prices from the
 * cloud client), built from the parts a jobs test already made. No user groups: the tests' policies name none.
 */
export function workerLifecycle(parts: {
  policy: Policy;
  store: RequestStore;
  queues: Queues;
  cloud: CloudApiClient;
  vmFacts: VmFactsStore;
  now: () => Date;
  logger: Logger;
  metrics: Metrics;
}): RequestLifecycle {
  const { policy, queues, cloud, now, ...rest } = parts;
  return new RequestLifecycle({
    ...rest,
    policy,
    now,
    outbox: createOutbox(queues, now),
    approvals: createApprovalPolicy(policy),
    prices: createPriceCache(cloud),
    sealKeys: TEST_SEAL_KEYS,
  });
}
