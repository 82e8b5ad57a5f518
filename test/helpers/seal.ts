import { type SealKeys, sealKeysFrom } from '../../src/config/seal-keys.ts';
import { approvalDecision, sealDecision } from '../../src/requests/approval/decision-seal.ts';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import type { RequestStore } from '../../src/requests/store/store.ts';

/**
 * The sealing key every bot the tests start is given (SEAL_KEY is required by every role and the bot never makes
 * one up). A fixed test value: nothing it seals outlives the test's Redis prefix.
 */
export const TEST_SEAL_KEY = '7e3f0c2a9b51d8e64a0f7c3b2d1e9a8f5c4b3a29d8e7f6a5b4c3d2e1f0a9b8c7';

/** A second key, for rotation tests (SEAL_KEY_PREVIOUS). */
export const TEST_SEAL_KEY_PREVIOUS = 'a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90';

/** The keys of {@link TEST_SEAL_KEY}, as a bot started with it holds them. */
export const TEST_SEAL_KEYS: SealKeys = sealKeysFrom(TEST_SEAL_KEY);

/**
 * Counts `user`'s approval of the pending request `request` the way the web role does (the store's compare-and-set,
 * sealed under `keys`), queueing it when that reaches its count (unless `queue` is false): what a test that stores requests itself needs for
 * the worker to run them.
 */
export async function approveSealed(
  store: RequestStore,
  request: CloudRequest,
  user: string,
  options: { keys?: SealKeys; queue?: boolean } = {},
): Promise<CloudRequest> {
  const keys = options.keys ?? TEST_SEAL_KEYS;
  const counted = await store.approve(request.id, user, request, {
    queue: options.queue ?? true,
    seal: (current, approval) => sealDecision(keys, current, approvalDecision(approval)),
  });
  if (!counted.ok) throw new Error(`approval of ${request.id} by ${user} not counted: ${counted.reason}`);
  return counted.request;
}
