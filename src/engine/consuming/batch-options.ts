/** The Worker's `batch` option (glide-mq's shape) and its check. */
import { invalid } from '../shared/errors.js';

/** The most jobs one batch may hold. */
export const MAX_BATCH_SIZE = 1000;

export interface BatchOptions {
  /** The most jobs handed to the processor at once: a whole number from 1 to 1000. */
  size: number;
  /**
   * How long (ms) the worker waits for a batch to fill, from its first job, before it hands over
   * the jobs it has; 0 (the default): it hands over what one read brought, at once.
   */
  timeout?: number;
}

/** The option checked (undefined: no batches); a refusal names the field and what it takes. */
export function checkBatch(b: BatchOptions | undefined): Required<BatchOptions> | undefined {
  if (b === undefined) return undefined;
  if (typeof b !== 'object' || b === null || Array.isArray(b)) throw invalid(`batch must be an object { size, timeout? }, got ${String(b)}`);
  const { size, timeout = 0 } = b;
  if (typeof size !== 'number' || !Number.isInteger(size) || size < 1 || size > MAX_BATCH_SIZE) {
    throw invalid(`batch.size must be a whole number from 1 to ${MAX_BATCH_SIZE} (the most jobs per batch), got ${String(size)}`);
  }
  if (typeof timeout !== 'number' || !Number.isFinite(timeout) || timeout < 0) {
    throw invalid(`batch.timeout must be a number of ms >= 0 (how long to wait for a batch to fill), got ${String(timeout)}`);
  }
  return { size, timeout };
}
