/**
 * The sealing key every bot the tests start is given (SEAL_KEY is required by every role and the bot never makes
 * one up). A fixed test value: nothing it seals outlives the test's Redis prefix.
 */
export const TEST_SEAL_KEY = '7e3f0c2a9b51d8e64a0f7c3b2d1e9a8f5c4b3a29d8e7f6a5b4c3d2e1f0a9b8c7';

/** A second key, for rotation tests (SEAL_KEY_PREVIOUS). */
export const TEST_SEAL_KEY_PREVIOUS = 'a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90';
