/**
 * Runs independent pieces of a test a few at a time instead of one after another: most of a CLI
 * run's time is waiting (the child's start, a connection refused, a retry), so a few at once
 * cost little more than one. Results come back in the order of `items`; the first failure is
 * thrown once every started piece has ended.
 */
export async function inParallel<T, R>(items: readonly T[], run: (item: T, index: number) => Promise<R>, limit = 4): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      results[i] = await run(items[i], i);
    }
  };
  const outcomes = await Promise.allSettled(Array.from({ length: Math.min(limit, items.length) }, lane));
  const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
  if (failed) throw failed.reason;
  return results;
}
