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
 * Options of the ioredis clients that wait for Redis to come back (`maxRetriesPerRequest: null`, which BullMQ needs)
 * and send the commands issued in the same tick in one socket write: the queues (a decision's announcement and its
 * job leave together) and the workers' own keys (a move to sending and its marker).
 */
export const QUEUE_REDIS_OPTIONS: RedisOptions = {
  maxRetriesPerRequest: null,
  enableAutoPipelining: true,
  autoPipeliningIgnoredCommands: BLOCKING_COMMANDS,
};

/**
 * Options of the client BullMQ's workers run on: waiting too, but each command written as it comes. A worker's
 * commands (taking a job, finishing it, renewing its lock) go out one at a time anyway, and ioredis copies every
 * script defined on a connection (about 65 of BullMQ's) onto each auto-pipelined batch: with auto-pipelining, an
 * add → process hop took 2.2 ms and 3.4 ms of CPU instead of 1.6 ms and 2.7 ms (400 hops, same process).
 */
export const JOBS_REDIS_OPTIONS: RedisOptions = { maxRetriesPerRequest: null };
