import type { Cluster, Redis } from 'ioredis';
import type { DigestSnapshot } from './price-fields.ts';

/** What each channel's previous digest showed, one JSON value per channel: `${prefix}:digest:snapshot:<channel>`. */
export class SnapshotStore {
  constructor(
    private readonly redis: Redis | Cluster,
    private readonly prefix: string,
  ) {}

  key(channel: string): string {
    return `${this.prefix}:digest:snapshot:${channel}`;
  }

  async get(channel: string): Promise<DigestSnapshot | undefined> {
    const raw = await this.redis.get(this.key(channel));
    if (raw === null) return undefined;
    try {
      return JSON.parse(raw) as DigestSnapshot;
    } catch {
      // A damaged snapshot only costs one "what changed" section; the next digest starts afresh.
      return undefined;
    }
  }

  /** Called only after every part of a digest was posted. */
  async save(channel: string, snapshot: DigestSnapshot): Promise<void> {
    await this.redis.set(this.key(channel), JSON.stringify(snapshot));
  }

  async delete(channel: string): Promise<void> {
    await this.redis.del(this.key(channel));
  }
}
