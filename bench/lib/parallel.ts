/** Runs `fn` over `items` with at most `parallel` calls in flight (workers share one iterator). */
export async function forEachParallel<T>(
  items: Iterable<T>,
  parallel: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  const iterator = items[Symbol.iterator]();
  const worker = async () => {
    for (let step = iterator.next(); !step.done; step = iterator.next()) await fn(step.value);
  };
  await Promise.all(Array.from({ length: Math.max(1, parallel) }, worker));
}

/** 0, 1, …, count - 1. */
export function* range(count: number): Generator<number> {
  for (let i = 0; i < count; i++) yield i;
}
