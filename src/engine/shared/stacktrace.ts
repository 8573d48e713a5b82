/**
 * The failure stacks a job keeps (BullMQ's job.stacktrace): each failed attempt's error stack,
 * newest last, at most MAX_STACKS of them, each cut to MAX_STACK_BYTES. Both bounds hold on the
 * server too (lua/finish.lua refuses a longer stack and keeps the newest MAX_STACKS), so a job hash
 * grows by at most 40 KiB however often it fails. Only the failure path carries a stack: a
 * completed job's finish sends nothing more (the stack rides in the finish's outcome argument,
 * 'failed:<stack>').
 */

/** Stacks kept per job (BullMQ's default stackTraceLimit is 10 too). */
export const MAX_STACKS = 10;
/** Bytes of one stack (UTF-8): enough for a dozen frames of deep paths; the rest is cut. */
export const MAX_STACK_BYTES = 4096;

/** The error's stack cut to MAX_STACK_BYTES (never splitting a character), or undefined when it has none. */
export function boundedStack(err: unknown): string | undefined {
  const stack = err instanceof Error ? err.stack : undefined;
  if (typeof stack !== 'string' || stack === '') return undefined;
  if (stack.length * 3 <= MAX_STACK_BYTES) return stack; // (no UTF-8 character takes more than 3 bytes per UTF-16 unit)
  const bytes = Buffer.from(stack, 'utf8');
  if (bytes.length <= MAX_STACK_BYTES) return stack;
  let end = MAX_STACK_BYTES;
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end--; // back to the start of a character
  return bytes.subarray(0, end).toString('utf8');
}

/** `kept` with `stack` appended, the newest MAX_STACKS (as the server stores them). */
export function appendStack(kept: string[], stack: string | undefined): string[] {
  if (stack === undefined) return kept;
  return [...kept, stack].slice(-MAX_STACKS);
}

/** A stored `stacktrace` field (JSON array of strings), or [] for none or one that is not that. */
export function parseStacktrace(text: string | undefined): string[] {
  if (!text) return [];
  try {
    const v = JSON.parse(text) as unknown;
    return Array.isArray(v) ? v.filter((s): s is string => typeof s === 'string') : [];
  } catch {
    return [];
  }
}
