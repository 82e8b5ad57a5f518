// A process that writes requests through its own RequestStore on a shared prefix, to show that appends from several
// processes keep one audit chain. Run with `node --import tsx`; config in CLOUDOPS_AUDIT_WRITER (JSON).
import { Redis } from 'ioredis';
import { sealKeysFrom } from '../../src/config/seal-keys.ts';
import { RequestStore } from '../../src/requests/store/store.ts';
import { resizeRequest } from '../fixtures/requests.ts';

const config = JSON.parse(process.env.CLOUDOPS_AUDIT_WRITER ?? '{}') as {
  redisUrl: string;
  prefix: string;
  sealKey: string;
  requests: number;
  actor: string;
};
const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: 3 });
const store = new RequestStore(redis, {
  prefix: config.prefix,
  audit: { sealer: sealKeysFrom(config.sealKey), policyVersion: () => 'abcdefabcdef' },
});
await Promise.all(
  Array.from({ length: config.requests }, async () => {
    const created = await store.create(resizeRequest(), config.actor);
    await store.approve(created.id, 'U0LEAD');
  }),
);
await redis.quit();
