import { expect } from 'vitest';
import { DEFAULT_SEED, type SimSeed } from '../../sim/cloud/server.ts';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { CHANNELS, defaultPolicyYaml, type Harness, PROD_UUID } from './harness.ts';

/*
 * The world of the failover tests (Redis Sentinel, Redis Cluster): a batch of pending resizes, one VM each so they
 * run in parallel, approved while the Redis master fails over.
 */

/** Requests in the batch, one VM each so they run in parallel. */
export const BATCH = 10;
const FIRST_VMID = 301;
export const FINAL = new Set(['succeeded', 'refused', 'unknown']);
/** Each resize takes this long at the sim, so the failover comes while calls are in flight. */
export const CALL_LATENCY_MS = 700;

/** The batch's VMs and two more. */
export const vmids = Array.from({ length: BATCH + 2 }, (_, i) => FIRST_VMID + i);
const prod = DEFAULT_SEED.projects.find((p) => p.uuid === PROD_UUID)!;
/** VM 102 of the default world (stopped, 4 cores) under other ids: a resize to 6 cores is allowed on each. */
const model = prod.vms.find((vm) => vm.vmid === 102)!;
export const failoverSeed: SimSeed = {
  ...DEFAULT_SEED,
  projects: DEFAULT_SEED.projects.map((p) =>
    p === prod
      ? { ...p, vms: [...p.vms, ...vmids.map((vmid) => ({ ...model, vmid, name: `ha-${vmid}` }))] }
      : p,
  ),
};
/** The default policy with the same VMs in shop-prod. */
export const failoverPolicyYaml = (start: Date) =>
  defaultPolicyYaml(start).replace(
    /(\n {6}- \{ vmid: 104[^\n]*)/,
    `$1${vmids.map((v) => `\n      - { vmid: ${v}, name: ha-${v}, cores: 4, ram_gb: 8, os_disk_gb: 100, cpu_class: regular, wan_mode: ipv4 }`).join('')}`,
  );

/** Creates a pending resize of `vmid` through the modal, and waits for its request message in the channel. */
export async function requestFor(
  h: Harness,
  vmid: number,
): Promise<{ request: CloudRequest; message: { ts: string } }> {
  const ack = await h.fillAndSubmit(`resize shop-prod ${vmid} cores=6`, {});
  expect(ack.json).toEqual({ response_action: 'clear' });
  const request = await h.waitForRequest((await h.nextRequest()).id, (r) => r.state === 'pending');
  return { request, message: await h.requestMessage(request.id) };
}

/** The replies in a request's thread, by text. */
export function threadTexts(h: Harness, messageTs: string): string[] {
  return h.slack
    .messages(CHANNELS.prod)
    .filter((m) => m.thread_ts === messageTs)
    .map((m) => m.text ?? '');
}
