import {
  createHmac,
  createSecretKey,
  hkdfSync,
  type KeyObject,
  randomUUID,
  timingSafeEqual,
} from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import type { ResizeTarget } from '../rules/types.ts';

/*
 * The claim scripts go as EVAL, never EVALSHA: an EVALSHA the server does not know is re-sent later, after commands
 * sent behind it, and a release must land after its claim and before the next submission's claim.
 */

/**
 * Claims a draft for one submission unless it was submitted already (its done mark) or another submission holds it,
 * and reads the version saved with a schedule, if any. KEYS: saved draft, claim, done. ARGV: token, ttl s. Returns
 * {saved draft or '', 1 when claimed, 1 when done}.
 */
const CLAIM = `
if redis.call('EXISTS', KEYS[3]) == 1 then return {'', 0, 1} end
local saved = redis.call('GET', KEYS[1]) or ''
if redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2], 'NX') then return {saved, 1, 0} end
return {saved, 0, 0}
`;

/** Deletes a claim only if it is still the one given. KEYS: claim. ARGV: token. */
const RELEASE_CLAIM = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

/**
 * What a modal needs to remember between opening and submitting. It travels in the modal's private_metadata, sealed
 * with an HMAC only the bot can make, so opening a form writes nothing to Redis and nothing the client changes is
 * trusted. A schedule's details (typed text of any length) are saved in Redis instead, under the draft's id.
 */
export interface Draft {
  id: string;
  kind: 'resize' | 'restore';
  user: string;
  teamId: string;
  channel: string;
  createdAt: string;
  /** The form returns the lease of this request (opened from its "Return to the previous size"). */
  leaseReturn?: string;
  /** A checked resize waiting for the requester to accept the earliest allowed time. */
  scheduled?: {
    projectName: string;
    vmid: number;
    target: ResizeTarget;
    confirmedStopped: boolean;
    acceptWanTwoStep: boolean;
    reason?: string;
    runAt: string;
    /** The Ticket field as typed, checked again as of `runAt` when the schedule is accepted. */
    ticket?: string;
  };
}

/** Drafts live two hours: long enough to fill a form, short enough not to pile up. */
const DRAFT_TTL_SECONDS = 2 * 60 * 60;
/** A submission holds its draft's claim at most this long: storing a request takes far less. */
const CLAIM_TTL_SECONDS = 60;
/** The sealed form's version, first in private_metadata; a form sealed by another version is refused as stale. */
const SEAL_VERSION = 'd2';

/** Why a form's draft cannot be used, as the submitter reads it. */
export type DraftRefusal = 'tampered' | 'stale';

/** What reading a submitted form's draft found. */
export interface DraftClaim {
  draft?: Draft;
  /** False when another submission of the same form holds the draft. */
  claimed: boolean;
  /** Why there is no draft: changed since it was sealed, or expired (or sealed before a key rotation) or submitted. */
  refused?: DraftRefusal;
}

/**
 * The key that seals drafts, derived from the secret Slack and the bot share in this mode (the app token in Socket
 * Mode, else the signing secret), so every process of one deployment derives the same key and no new setting is
 * needed; rotating that secret makes open forms stale (each seal names its key, so they are told apart from changed ones).
 */
export function draftSealKey(secret: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, 'cloudops', 'cloudops draft seal v1', 32));
}

export class DraftStore {
  /** The seal key as a KeyObject: an HMAC keyed with a Buffer prepares the key anew each time (about 6× slower). */
  private readonly hmacKey: KeyObject;
  /**
   * Names the key in each seal (it reveals nothing of it): a seal made with another key was made before the secret it
   * comes from was rotated, so it is expired, not changed.
   */
  private readonly keyId: string;

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly prefix: string,
    sealKey: Buffer,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.hmacKey = createSecretKey(sealKey);
    this.keyId = createHmac('sha256', this.hmacKey)
      .update('cloudops draft seal key id')
      .digest('base64url')
      .slice(0, 8);
  }

  private key(id: string): string {
    return `${this.prefix}:draft:${id}`;
  }

  /** A new draft and what the form carries of it (its private_metadata): nothing is written until it is submitted. */
  create(draft: Omit<Draft, 'id'>): { draft: Draft; sealed: string } {
    const full: Draft = { ...draft, id: randomUUID() };
    return { draft: full, sealed: this.seal(full) };
  }

  /** Saves the draft with what a schedule needs, read back by the submission of the form that carries its seal. */
  async save(draft: Draft): Promise<void> {
    await this.redis.set(this.key(draft.id), JSON.stringify(draft), 'EX', DRAFT_TTL_SECONDS);
  }

  /**
   * Opens a form's sealed draft and claims it for one submission (`token` names it), in one round trip, so a double
   * submit or a replayed payload stores one request: `claimed` is false when another submission holds it. A seal the
   * bot did not make, an old one, or a draft already submitted is refused.
   */
  async claimAndGet(sealed: string, token: string): Promise<DraftClaim> {
    const opened = this.open(sealed);
    if (typeof opened === 'string') return { claimed: false, refused: opened };
    const [saved, claimed, done] = (await this.redis.eval(
      CLAIM,
      3,
      this.key(opened.id),
      this.claimKey(opened.id),
      this.doneKey(opened.id),
      token,
      CLAIM_TTL_SECONDS,
    )) as [string, number, number];
    if (Number(done) === 1) return { claimed: false, refused: 'stale' };
    return { draft: saved ? (JSON.parse(saved) as Draft) : opened, claimed: Number(claimed) === 1 };
  }

  /** Gives a claim back after a submission failed, so the same form can be submitted again. */
  async release(sealed: string, token: string): Promise<void> {
    const opened = this.open(sealed);
    if (typeof opened === 'string') return;
    await this.redis.eval(RELEASE_CLAIM, 1, this.claimKey(opened.id), token);
  }

  /**
   * Marks a draft submitted once its request exists (for as long as its form could be submitted), so a replayed
   * submission finds nothing to submit; its saved version and claim go.
   */
  async take(id: string): Promise<void> {
    await this.redis
      .multi()
      .set(this.doneKey(id), '1', 'EX', DRAFT_TTL_SECONDS)
      .del(this.key(id), this.claimKey(id))
      .exec();
  }

  private claimKey(id: string): string {
    return `${this.key(id)}:claim`;
  }

  private doneKey(id: string): string {
    return `${this.key(id)}:done`;
  }

  private seal(draft: Draft): string {
    const body = Buffer.from(JSON.stringify(draft)).toString('base64url');
    return `${SEAL_VERSION}.${this.keyId}.${body}.${this.mac(body)}`;
  }

  /** The draft a seal holds, or why it cannot be used. */
  private open(sealed: string): Draft | DraftRefusal {
    const [version, keyId, body, mac] = sealed.split('.');
    if (version !== SEAL_VERSION || keyId !== this.keyId || !body || !mac) return 'stale';
    const expected = Buffer.from(this.mac(body));
    const given = Buffer.from(mac);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return 'tampered';
    const draft = JSON.parse(Buffer.from(body, 'base64url').toString()) as Draft;
    const age = this.now().getTime() - Date.parse(draft.createdAt);
    return age >= 0 && age <= DRAFT_TTL_SECONDS * 1000 ? draft : 'stale';
  }

  private mac(body: string): string {
    return createHmac('sha256', this.hmacKey)
      .update(SEAL_VERSION)
      .update('.')
      .update(this.keyId)
      .update('.')
      .update(body)
      .digest('base64url');
  }
}
