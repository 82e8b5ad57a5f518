/**
 * The audit export (docs/operations.md#audit-export), started by the worker role when AUDIT_WEBHOOK_URL is set: it
 * ships the audit stream to the company's log system. Stopped with the workers, so a batch in flight can finish.
 */
import type { Dispatcher } from 'undici';
import { startAuditShipper } from '../audit-export/shipper.ts';
import { outboundDispatcher } from '../config/outbound.ts';
import { packageVersion } from '../config/version.ts';
import type { Core } from './core.ts';
import { within } from './stages.ts';

/** How long connecting to the receiver may take. */
const CONNECT_TIMEOUT_MS = 10_000;

/**
 * Starts the export over the core's waiting records connection. `dispatcher` carries the POSTs; without one a
 * keep-alive pool of its own (through the outbound proxy when one is set) is opened and closed at shutdown.
 */
export function startAuditExport(core: Core, dispatcher?: Dispatcher): void {
  const { env, stages } = core;
  if (env.AUDIT_WEBHOOK_URL === undefined) return;
  const own = dispatcher ? undefined : outboundDispatcher(env, { connect: { timeout: CONNECT_TIMEOUT_MS } });
  const shipper = startAuditShipper(
    {
      redis: core.recordsRedis,
      prefix: core.prefix,
      url: env.AUDIT_WEBHOOK_URL,
      secret: env.AUDIT_WEBHOOK_SECRET,
      secrets: core.secrets,
      dispatcher: dispatcher ?? own!,
      logger: core.logger,
      metrics: core.metrics,
      userAgent: `cloudops/${packageVersion()}`,
    },
    core.options.auditExportPolicy,
  );
  stages.work.push((budget) => shipper.stop(budget));
  if (own) stages.connections.push((budget) => within(own.close(), budget));
}
