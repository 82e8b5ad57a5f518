import type { RedisOptions } from 'ioredis';

/**
 * Commands that block their connection until data arrives. BullMQ runs them on a duplicate of the workers'
 * connection, which inherits auto-pipelining; ioredis does not leave them out on its own, so they are listed here
 * and always go out alone.
 */
export const BLOCKING_COMMANDS = [
  'blpop',
  'brpop',
  'brpoplpush',
  'blmove',
  'blmpop',
  'bzpopmin',
  'bzpopmax',
  'bzmpop',
  'xread',
  'xreadgroup',
  'wait',
  'waitaof',
];

/**
 * Options of the ioredis client that queues and workers share. `maxRetriesPerRequest: null` makes them wait for
 * Redis to come back (BullMQ needs it). Auto-pipelining sends the commands that concurrent jobs issue in the same
 * tick in one socket write: the workers spent a quarter of their CPU writing commands one by one.
 */
export const QUEUE_REDIS_OPTIONS: RedisOptions = {
  maxRetriesPerRequest: null,
  enableAutoPipelining: true,
  autoPipeliningIgnoredCommands: BLOCKING_COMMANDS,
};
