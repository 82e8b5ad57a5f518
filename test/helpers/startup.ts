/**
 * How long a test lets a bot, a worker or a redis-server take to start: STARTUP_TIMEOUT_SECONDS when set, else a
 * generous 120 s, so a loaded machine (another suite beside this one) slows the suite down instead of failing it.
 * Child bots get the same value in their environment (`spawnBot`), unless a test sets its own.
 */
export const STARTUP_TIMEOUT_SECONDS = Number(process.env.STARTUP_TIMEOUT_SECONDS) || 120;

/** {@link STARTUP_TIMEOUT_SECONDS} in milliseconds, for waits in tests. */
export const STARTUP_WAIT_MS = STARTUP_TIMEOUT_SECONDS * 1000;

/**
 * How long a test waits for something the bot does (a message, a state): the wait ends as soon as it happens, so a
 * long one costs nothing when green and keeps a loaded machine from failing the suite.
 */
export const WAIT_MS = 30_000;
