// The keys and arguments of the store's two writing scripts (scripts.ts CREATE and CAS), from what the store
// decided: the request, its audit entries chained onto the head, the records that go with them.
import { hash } from 'node:crypto';
import type { Reservation } from '../audit/append.ts';
import { entryArgs } from '../audit/append.ts';
import { type CloudRequest, FINAL_STATES } from '../model/types.ts';
import type { VmFactsWrite } from '../vm-facts.ts';
import { leaseIndex, peopleOf } from './changes.ts';
import { CHANNEL_INDEX_KEEP, REQUESTER_INDEX_KEEP, type RequestKeys } from './keys.ts';

type ScriptArgs = [keys: string[], args: (string | number)[]];

/** CREATE's keys and arguments for a new request and its two entries ('created' and its initial state). */
export function createArgs(
  keys: RequestKeys,
  request: CloudRequest,
  at: Date,
  reservation: Reservation,
): ScriptArgs {
  return [
    [
      keys.request(request.id),
      keys.channel(request.channel),
      keys.audit,
      keys.awaitingRun,
      keys.created,
      keys.requestedBy(request.requester),
      keys.auditHead,
      ...peopleOf(request).map(keys.involving),
    ],
    [
      JSON.stringify(request),
      at.getTime(),
      request.id,
      request.state,
      reservation.prev,
      '',
      at.getTime(),
      CHANNEL_INDEX_KEEP,
      REQUESTER_INDEX_KEEP,
      ...entryArgs(reservation.entries),
    ],
  ];
}

/** CAS's keys and arguments for moving `current` (stored as `json`) to `next`, with up to two entries. */
export function casArgs(
  keys: RequestKeys,
  write: {
    json: string;
    current: CloudRequest;
    next: CloudRequest;
    at: Date;
    reservation: Reservation;
    vmFacts?: VmFactsWrite;
  },
): ScriptArgs {
  const { json, current, next, at, vmFacts } = write;
  const [first, second] = write.reservation.entries;
  return [
    [
      keys.request(next.id),
      keys.audit,
      keys.awaitingRun,
      keys.retention,
      keys.leases,
      keys.auditHead,
      ...(vmFacts ? [vmFacts.key] : []),
      ...peopleOf(next, current).map(keys.involving),
    ],
    [
      hash('sha1', json, 'hex'),
      JSON.stringify(next),
      at.getTime(),
      next.id,
      first?.json ?? '',
      first?.hash ?? '',
      write.reservation.prev,
      first?.seal ?? '',
      FINAL_STATES.includes(next.state) && !next.leaseOpen ? at.getTime() : '',
      FINAL_STATES.includes(next.state) ? '1' : '',
      next.state !== current.state ? next.state : '',
      leaseIndex(current, next),
      vmFacts ? '1' : '',
      second?.json ?? '',
      second?.hash ?? '',
      second?.seal ?? '',
      ...(vmFacts?.args ?? []),
    ],
  ];
}
