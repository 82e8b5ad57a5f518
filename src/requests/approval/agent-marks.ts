import { FINAL_STATES } from '../model/types.ts';
import type { Outbox } from '../outbox.ts';
import type { RequestStore } from '../store/store.ts';

/**
 * Marks (or unmarks) the open requests that agent `name` asked for `person` as asked by a disabled agent, each with an
 * audit entry, and has their messages updated so the approvers see why Approve is refused. Returns how many changed.
 */
export async function markAgentRequests(
  deps: { store: RequestStore; outbox: Pick<Outbox, 'announce'> },
  name: string,
  person: string,
  disabled: boolean,
): Promise<number> {
  const { requests } = await deps.store.listInvolving(person);
  let changed = 0;
  for (const request of requests) {
    if (request.agent?.name !== name) continue;
    const noted = await deps.store.note(
      request.id,
      {
        note: 'agent',
        actor: 'cloudops',
        detail: `agent ${name} ${disabled ? 'disabled' : 'enabled again'}`,
      },
      (current) =>
        current.agent?.name === name &&
        !FINAL_STATES.includes(current.state) &&
        (current.agent.disabled ?? false) !== disabled
          ? { agent: { name, ...(disabled ? { disabled: true } : {}) } }
          : undefined,
    );
    if (!noted.ok) continue;
    changed += 1;
    await deps.outbox.announce(noted.request);
  }
  return changed;
}
