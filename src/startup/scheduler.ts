/**
 * The scheduler role: the digest schedules, and the due times of requests (reminders, escalations, freeze ends,
 * lease ends). Run it in one process, or in several: each due time is claimed once.
 */
import { startDueScheduler } from '../jobs/due-times.ts';
import type { Core } from './core.ts';

/** Starts the schedulers over the core; resolves once the digest schedules are read. */
export async function startScheduler(core: Core): Promise<void> {
  const { requests } = core;
  await core.deadline.step('Redis (the digest scheduler)', core.digests.startScheduler());
  const due = startDueScheduler(
    {
      due: core.queues.due,
      handlers: {
        remind: (id) => requests.remind(id),
        escalate: (id) => requests.escalate(id),
        'freeze-end': (id) => requests.endFreeze(id),
        lease: (id) => requests.leases.due(id),
      },
      now: core.now,
      logger: core.logger,
    },
    core.options.duePolicy,
  );
  core.stages.intake.push(() => due.stop());
}
