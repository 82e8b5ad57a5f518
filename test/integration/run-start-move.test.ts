import type { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { moveState } from '../../src/requests/lifecycle/run-start.ts';
import { MOVE_STATE_LUA } from '../../src/requests/store/scripts.ts';
import { testRedis } from '../helpers/redis.ts';

// The run's start predicts the lock script's move to sending in TypeScript (moveState) and the script writes the
// prediction only when it is the text its own Lua would have made: the two must agree byte for byte, or find no tail
// on the same texts. Checked against the script's Lua on the real Redis.
let redis: Redis;
beforeAll(() => {
  redis = testRedis();
});
afterAll(async () => {
  await redis.quit();
});

const AT = '2026-12-07T15:00:00.123Z';
const tail = (state: string, version: number, revision: number) =>
  `,"state":"${state}","version":${version},"revision":${revision},"updatedAt":"2026-12-07T14:00:00.000Z"}`;

const TEXTS = [
  `{"id":"r1","note":"plain"${tail('queued', 3, 2)}`,
  // Text before the tail that looks like a tail: only the end counts.
  `{"id":"r2","reason":"\\",\\"state\\":\\"queued\\",\\"version\\":9","x":1${tail('queued', 12, 7)}`,
  `{"id":"r3","reason":"ünïcödé ✓ \\n line"${tail('queued', 1, 0)}`,
  `{"id":"r4","s":"a_b"${tail('lease_open', 5, 5)}`,
  // No tail: the stored order of an older version, a tail with a field after it, an unterminated text.
  `{"id":"r5","state":"queued","version":3,"revision":2,"updatedAt":"x","more":1}`,
  `{"id":"r6"${tail('queued', 3, 2)} `,
  `{"id":"r7","state":"queued","version":"3","revision":2,"updatedAt":"x"}`,
];

it('moves to sending exactly as the lock script does, and finds no tail where it finds none', async () => {
  for (const text of TEXTS) {
    const lua = (await redis.eval(
      `${MOVE_STATE_LUA}\nreturn move_state(ARGV[1], 'sending', ARGV[2]) or false`,
      0,
      text,
      AT,
    )) as string | null;
    expect(moveState(text, 'sending', AT) ?? null, text).toBe(lua);
  }
  expect(moveState(TEXTS[0] ?? '', 'sending', AT)).toBe(
    `{"id":"r1","note":"plain"${tail('sending', 4, 3).replace('2026-12-07T14:00:00.000Z', AT)}`,
  );
});
