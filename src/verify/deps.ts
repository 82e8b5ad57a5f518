import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Cluster, Redis } from 'ioredis';
import type { SealKeys } from '../config/seal-keys.ts';
import type { Logger } from '../observability/logger.ts';
import type { VerifiedApprover } from '../requests/approval/verified-approval.ts';
import { type CloudRequest, type RequestState, revisionOf } from '../requests/model/types.ts';
import type { Standing } from '../slack-api/users.ts';
import type { LinkStore } from './links.ts';
import type { PasskeyStore, RelyingParty } from './passkeys.ts';
import type { PageSessions } from './sessions.ts';
import type { SsoFlow } from './sso-flow.ts';

/** What the page works with. */
export interface VerifyPageDeps {
  links: LinkStore;
  sessions: PageSessions;
  passkeys: PasskeyStore;
  requests: { get(id: string): Promise<CloudRequest | undefined> };
  approver: VerifiedApprover;
  rp: RelyingParty;
  /** PUBLIC_URL is https: cookies are Secure and `__Host-`. */
  secure: boolean;
  /** PUBLIC_URL's path prefix without a trailing slash ('' for none): the browser's paths carry it. */
  root: string;
  /**
   * Has `user` sent a direct message (a passkey registered for them), retried until Slack takes it; `id` names the
   * message so that it is sent once.
   */
  notify(user: string, text: string, id: string): Promise<void>;
  logger: Logger;
  /** Where the page keeps what an SSO login needs to finish. */
  redis: Redis | Cluster;
  prefix: string;
  /** The SSO login; undefined where OIDC is not configured. */
  sso?: { flow: SsoFlow; issuerOrigin: string };
  /** SEAL_KEY's keys (purpose `verify`): what lets a person pass verification is sealed with them. */
  sealKeys?: SealKeys;
  /**
   * A person's standing in Slack now, asked right before their verified decision counts (someone deactivated since
   * the link was sent decides nothing), with the email an SSO login must match.
   */
  standing(user: string): Promise<Standing>;
}

/** One handler: the path parameters it was matched with. */
export type PageHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  token: string,
  deps: VerifyPageDeps,
) => Promise<void>;

/**
 * The request's state as a link sees it: why a link for `version` cannot be used now, or undefined. `state`: the one
 * the request must still be in (pending for an approval, frozen for a break glass).
 */
export function requestMoved(
  request: CloudRequest | undefined,
  version: number,
  state: RequestState = 'pending',
): 'gone' | 'changed' | undefined {
  if (!request) return 'gone';
  if (request.state !== state || revisionOf(request) !== version) return 'changed';
  return undefined;
}
