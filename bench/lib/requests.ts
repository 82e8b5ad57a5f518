import type { CloudRequest, NewRequest } from '../../src/requests/model/types.ts';
import type { RequestStore } from '../../src/requests/store/store.ts';
import { BENCH } from './identity.ts';
import { forEachParallel, range } from './parallel.ts';

/** A resize to `cores` of one VM of the bench project, as the Slack side would submit it after the modal. */
export function benchResize(
  projectUuid: string,
  vmid: number,
  cores = 4,
  state: 'pending' | 'queued' = 'pending',
): NewRequest {
  const target = { cores };
  return {
    kind: 'resize',
    state,
    teamId: BENCH.teamId,
    channel: BENCH.channel,
    projectName: BENCH.project,
    projectUuid,
    vmid,
    params: {
      kind: 'resize',
      target,
      steps: [target],
      before: { vmid, ha: false, cores: 2, ramGb: 4, osDiskGb: 50, wanMode: 'ipv4' },
      confirmedStopped: true,
    },
    requester: BENCH.requester,
    needsApproval: state === 'pending',
    approvers: [BENCH.approver],
    expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
    notes: [],
  };
}

/** Creates `count` requests through the store, `parallel` at a time; `make(i)` builds the i-th. */
export async function createMany(
  store: RequestStore,
  count: number,
  make: (i: number) => NewRequest,
  parallel = 100,
): Promise<CloudRequest[]> {
  const out: CloudRequest[] = [];
  await forEachParallel(range(count), parallel, async (i) => {
    out.push(await store.create(make(i), BENCH.requester));
  });
  return out;
}
