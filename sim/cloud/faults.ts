/** Injected faults per route: each applies `times` calls (default 1), in the order they were added. */
import { z } from 'zod';

/** The five routes of the documented operations. */
export const SIM_ROUTES = ['list', 'getB', 'getA', 'resize', 'restore'] as const;
export type SimRoute = (typeof SIM_ROUTES)[number];

const times = z.number().int().positive().optional();
const afterApply = z.boolean().optional();

/**
 * One fault:
 * - `latency`: wait `ms` before handling (the mutation stays in flight meanwhile), then answer normally.
 * - `status`: answer `status` (e.g. 429/503 with `retryAfter` seconds or an HTTP date; 500) instead of the
 *   real answer; with `afterApply` the change is made first (a 500 after applying).
 * - `hang`: never answer (or answer late after `ms`); `afterApply` (default true) makes the change first.
 * - `drop`: destroy the socket without answering; `afterApply` (default true) makes the change first.
 * - `body`: answer `status` (default 200) with `body` (non-JSON text, HTML…); `afterApply` default true.
 */
export const simFaultSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('latency'), ms: z.number().int().nonnegative(), times }),
  z.object({
    kind: z.literal('status'),
    status: z.number().int().min(400).max(599),
    retryAfter: z.union([z.number().int().nonnegative(), z.string()]).optional(),
    body: z.string().optional(),
    contentType: z.string().optional(),
    afterApply,
    times,
  }),
  z.object({ kind: z.literal('hang'), ms: z.number().int().nonnegative().optional(), afterApply, times }),
  z.object({ kind: z.literal('drop'), afterApply, times }),
  z.object({
    kind: z.literal('body'),
    body: z.string(),
    contentType: z.string().optional(),
    status: z.number().int().min(200).max(599).optional(),
    afterApply,
    times,
  }),
]);

export type SimFault = z.infer<typeof simFaultSchema>;

/** Faults waiting per route. */
export class FaultBook {
  private readonly pending = new Map<SimRoute, { fault: SimFault; left: number }[]>();

  add(route: SimRoute, fault: SimFault): void {
    const parsed = simFaultSchema.parse(fault);
    const list = this.pending.get(route) ?? [];
    list.push({ fault: parsed, left: parsed.times ?? 1 });
    this.pending.set(route, list);
  }

  /** The fault for the next call on `route`, counting it as used. */
  take(route: SimRoute): SimFault | undefined {
    const list = this.pending.get(route);
    const first = list?.[0];
    if (!list || !first) return undefined;
    first.left -= 1;
    if (first.left <= 0) list.shift();
    return first.fault;
  }

  clear(): void {
    this.pending.clear();
  }

  toJSON(): Record<string, { fault: SimFault; left: number }[]> {
    return Object.fromEntries(this.pending);
  }
}
