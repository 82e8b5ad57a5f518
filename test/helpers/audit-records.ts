import type { Cluster, Redis } from 'ioredis';

/** The audit stream's entries as records (a chained entry keeps its whole JSON in `e`), oldest first. */
export async function auditRecords(
  redis: Redis | Cluster,
  prefix: string,
): Promise<Record<string, unknown>[]> {
  return (await redis.xrange(`${prefix}:audit`, '-', '+')).map(
    ([, fields]) => JSON.parse(fields[fields.indexOf('e') + 1] ?? '{}') as Record<string, unknown>,
  );
}
