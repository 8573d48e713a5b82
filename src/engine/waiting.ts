/** Small waits a worker's own loops use (this process's timers only; nothing here is sent to the server). */

/** Waits `ms`. */
export function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Waits for `p` (whose failure is not this wait's concern) at most `ms`; the timer never outlives it. */
export async function within(p: Promise<unknown> | undefined, ms: number): Promise<void> {
  if (!p) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p.catch(() => undefined), new Promise((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
}

/** How long close() waits for each of its calls to the server (one that is gone must not hold it). */
export const CLOSE_CALL_MS = 2000;

/** This process's monotonic clock (ms): for a worker's own waiting only, never sent to the server. */
export function monotonic(): number {
  return performance.now();
}
