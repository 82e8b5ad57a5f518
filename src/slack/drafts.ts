import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { ResizeTarget } from '../rules/types.ts';

/*
 * The claim scripts go as EVAL, never EVALSHA: an EVALSHA the server does not know is re-sent later, after commands
 * sent behind it, and a release must land after its claim and before the next submission's claim.
 */

/**
 * Reads a draft and, when it exists, claims it unless another submission holds it. KEYS: draft, claim. ARGV: token,
 * ttl s. Returns {draft or '', 1 when claimed}.
 */
const CLAIM_AND_GET = `
local draft = redis.call('GET', KEYS[1])
if not draft then return {'', 0} end
if redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2], 'NX') then return {draft, 1} end
return {draft, 0}
`;

/** Deletes a claim only if it is still the one given. KEYS: claim. ARGV: token. */
const RELEASE_CLAIM = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

/**
 * What a modal needs to remember between opening and submitting. The modal's private_metadata carries only
 * the draft id; everything else stays here, so nothing the client sends back is trusted.
 */
export interface Draft {
  id: string;
  kind: 'resize' | 'restore';
  user: string;
  teamId: string;
  channel: string;
  createdAt: string;
  /** A checked resize waiting for the requester to accept the earliest allowed time. */
  scheduled?: {
    projectName: string;
    vmid: number;
    target: ResizeTarget;
    confirmedStopped: boolean;
    acceptWanTwoStep: boolean;
    reason?: string;
    runAt: string;
  };
}

/** Drafts live two hours: long enough to fill a form, short enough not to pile up. */
const DRAFT_TTL_SECONDS = 2 * 60 * 60;
/** A submission holds its draft's claim at most this long: storing a request takes far less. */
const CLAIM_TTL_SECONDS = 60;

export class DraftStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  private key(id: string): string {
    return `${this.prefix}:draft:${id}`;
  }

  async create(draft: Omit<Draft, 'id'>): Promise<Draft> {
    const full: Draft = { ...draft, id: randomUUID() };
    await this.redis.set(this.key(full.id), JSON.stringify(full), 'EX', DRAFT_TTL_SECONDS);
    return full;
  }

  /** The draft, or undefined for an unknown, expired or malformed id. */
  async get(id: string): Promise<Draft | undefined> {
    if (!/^[0-9a-f-]{36}$/.test(id)) return undefined;
    const raw = await this.redis.get(this.key(id));
    return raw ? (JSON.parse(raw) as Draft) : undefined;
  }

  async save(draft: Draft): Promise<void> {
    await this.redis.set(this.key(draft.id), JSON.stringify(draft), 'EX', DRAFT_TTL_SECONDS);
  }

  /**
   * Reads a draft and claims it for one submission (`token` names it), in one round trip, so a double submit or a
   * replayed payload stores one request: `claimed` is false when another submission holds it. The draft itself
   * stays until {@link take}.
   */
  async claimAndGet(id: string, token: string): Promise<{ draft?: Draft; claimed: boolean }> {
    if (!/^[0-9a-f-]{36}$/.test(id)) return { claimed: false };
    const [raw, claimed] = (await this.redis.eval(
      CLAIM_AND_GET,
      2,
      this.key(id),
      this.claimKey(id),
      token,
      CLAIM_TTL_SECONDS,
    )) as [string, number];
    if (!raw) return { claimed: false };
    return { draft: JSON.parse(raw) as Draft, claimed: Number(claimed) === 1 };
  }

  /** Gives a claim back after a submission failed, so the same form can be submitted again. */
  async release(id: string, token: string): Promise<void> {
    if (!/^[0-9a-f-]{36}$/.test(id)) return;
    await this.redis.eval(RELEASE_CLAIM, 1, this.claimKey(id), token);
  }

  /** Removes a draft (and its claim) once its request exists, so a replayed submission finds nothing to submit. */
  async take(id: string): Promise<boolean> {
    return (await this.redis.del(this.key(id), this.claimKey(id))) >= 1;
  }

  private claimKey(id: string): string {
    return `${this.key(id)}:claim`;
  }
}
