import { createHash } from 'node:crypto';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { AgentPolicy } from '../config/agents.ts';
import { AgentLimitError, ApprovalUnreachableError } from '../requests/lifecycle/types.ts';
import { type CloudRequest, FINAL_STATES } from '../requests/model/types.ts';
import type { RequestStore } from '../requests/store/store.ts';
import { TicketError } from '../tickets/errors.ts';
import type { AgentControls, AskClaim } from './agent-state.ts';
import { answer, refusal, requestText, requestView } from './answers.ts';

/** How long an ask waits for an identical one being made at the same moment, to answer with its request. */
const SAME_ASK_WAIT_MS = 5_000;
const SAME_ASK_STEP_MS = 50;

/** What makes two asks the same change: the change planned, never the reason (a retry may word it again). */
function fingerprint(parts: Record<string, unknown>): string {
  const sorted = Object.fromEntries(
    Object.entries(parts)
      .filter(([, value]) => value !== undefined)
      .sort(([a], [b]) => a.localeCompare(b)),
  );
  return createHash('sha256').update(JSON.stringify(sorted)).digest('base64url').slice(0, 32);
}

/**
 * The asking of `agent` made once (`request_resize`, `request_restore`): `created` words the answer of a new
 * request.
 */
export function askOnceFor(
  deps: { controls: AgentControls; store: RequestStore },
  agent: AgentPolicy,
  created: (request: CloudRequest) => CallToolResult,
): (
  change: Record<string, unknown>,
  key: string | undefined,
  make: () => Promise<CloudRequest>,
) => Promise<CallToolResult> {
  /** A claim in the ledger, after waiting out an identical ask being made at this moment (a few round trips). */
  const settled = async (claim: () => Promise<AskClaim>): Promise<AskClaim> => {
    let got = await claim();
    for (let waited = 0; got.kind === 'busy' && waited < SAME_ASK_WAIT_MS; waited += SAME_ASK_STEP_MS) {
      await new Promise((resolve) => setTimeout(resolve, SAME_ASK_STEP_MS));
      got = await claim();
    }
    return got;
  };
  const stillBeingMade = () =>
    refusal(
      `Not requested: an identical request by agent ${agent.name} is still being made; ask again in a few seconds for its id.`,
    );
  /**
   * Makes an ask once: an ask whose idempotency key made a request answers with it, however it ended; an identical
   * ask (the same planned change, whatever its key) answers with the open request it matches. Else the ask's place in
   * the hourly limit is taken, and given back when `make` makes nothing (a refusal it throws as one of `refusals`,
   * which becomes the answer). Agents retry: two identical asks make one request.
   */
  const askOnce = async (
    change: Record<string, unknown>,
    key: string | undefined,
    make: () => Promise<CloudRequest>,
  ): Promise<CallToolResult> => {
    const print = fingerprint(change);
    const keyed =
      key === undefined ? undefined : await settled(() => deps.controls.claimAsk(agent.name, key, print));
    if (keyed?.kind === 'busy') return stillBeingMade();
    if (keyed?.kind === 'made') return keyedAnswer(deps, agent, keyed, key ?? '');
    // A new key does not make a new request of an identical open one: the key answers with that request from now on.
    let same = await settled(() => deps.controls.claimAsk(agent.name, undefined, print));
    while (same.kind === 'made') {
      const existing = await deps.store.get(same.requestId);
      if (existing && !FINAL_STATES.includes(existing.state)) {
        await keyed?.made(existing.id);
        return answer(
          `An identical request (${existing.id}) is already open: nothing new was made. ${requestText(existing)}`,
          requestView(existing),
        );
      }
      // An identical ask made after the request ended is a new one.
      const retry = same.retry;
      same = await settled(retry);
    }
    if (same.kind === 'busy') {
      await keyed?.dropped();
      return stillBeingMade();
    }
    const claims = [same, ...(keyed ? [keyed] : [])];
    const taken = await deps.controls.takeAsk(agent.name, agent.requests_per_hour);
    if (!taken.ok) {
      await Promise.all(claims.map((c) => c.dropped()));
      return refusal(
        `Not requested: agent ${agent.name} made its ${agent.requests_per_hour} requests of the last hour; it may ask again at ${taken.retryAt.toISOString()}.`,
      );
    }
    let request: CloudRequest;
    try {
      request = await make();
    } catch (error) {
      // Only what was made counts: a refusal (or a failure before anything was stored) gives the place back.
      await Promise.all([taken.release(), ...claims.map((c) => c.dropped())]);
      if (error instanceof ApprovalUnreachableError || error instanceof AgentLimitError)
        return refusal(error.message);
      if (error instanceof TicketError) return refusal(`Not requested: ${error.reason}`);
      throw error;
    }
    await Promise.all(claims.map((c) => c.made(request.id)));
    return created(request);
  };
  return askOnce;
}

/** The answer to an ask whose idempotency key already made a request: that request, however it ended. */
async function keyedAnswer(
  deps: { store: RequestStore },
  agent: AgentPolicy,
  keyed: Extract<AskClaim, { kind: 'made' }>,
  key: string,
): Promise<CallToolResult> {
  if (!keyed.same)
    return refusal(
      `Not requested: idempotency key “${key}” was used for request ${keyed.requestId}, a different ask.`,
    );
  const existing = await deps.store.get(keyed.requestId);
  if (!existing) return refusal(`There is no request ${keyed.requestId} that agent ${agent.name} may see.`);
  return answer(
    `Already asked with idempotency key “${key}”: nothing new was made. ${requestText(existing)}`,
    requestView(existing),
  );
}
