import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { ResizeTarget } from '../rules/types.ts';

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

  /** Removes a draft once its request exists, so a replayed submission finds nothing to submit. */
  async take(id: string): Promise<boolean> {
    return (await this.redis.del(this.key(id))) === 1;
  }
}
