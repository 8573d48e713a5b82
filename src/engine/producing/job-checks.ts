/**
 * The checks every added job's own parts pass, whatever its options (encodeJob, and encodeJobLike
 * for a flow node sharing a sibling's options): its name, its data as JSON, its id, and the data's
 * size against the job's sizeLimit. Each refusal names what to change.
 */
import { invalid, PayloadTooLargeError } from '../shared/errors.js';

/** The longest job id, in bytes (lua/args.lua MAX_ID_LEN: the library counts bytes). */
export const MAX_JOB_ID_BYTES = 256;
export const DEFAULT_MAX_PAYLOAD = 512 * 1024;
/** The longest job name, in bytes (lua/jobs.lua MAX_JOB_NAME_LEN: the library counts bytes). */
export const MAX_JOB_NAME_BYTES = 1024;

export function checkJobName(name: string): void {
  if (typeof name !== 'string' || name.length === 0) throw invalid('job name must be a non-empty string');
  const nameBytes = Buffer.byteLength(name);
  if (nameBytes > MAX_JOB_NAME_BYTES) {
    throw invalid(`job name "${name.slice(0, 40)}..." is ${nameBytes} bytes, over the limit of ${MAX_JOB_NAME_BYTES} bytes; use a short name and put the rest in the job's data`);
  }
}

/**
 * A job's data (or a broadcast message's: `what`) as the JSON text stored (none: {}), or a refusal
 * saying why it has none.
 */
export function dataJson(data: unknown, what = 'job'): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(data === undefined ? {} : data);
  } catch (err) {
    throw invalid(`${what} data cannot be serialised to JSON: ${(err as Error).message}`);
  }
  if (json === undefined) throw invalid(`${what} data cannot be serialised to JSON`);
  return json;
}

export function checkJobId(jobId: string): void {
  if (typeof jobId !== 'string' || Buffer.byteLength(jobId) > MAX_JOB_ID_BYTES || /[:\s{}\p{Cc}]/u.test(jobId)) {
    throw invalid(`job id "${String(jobId)}" is invalid: at most ${MAX_JOB_ID_BYTES} bytes, no ":", "{", "}", whitespace or control characters`);
  }
  if (/^-?\d+$/.test(jobId)) {
    throw invalid(`job id "${jobId}" is invalid: custom ids cannot be whole numbers (those are the ids the queue hands out, so "${jobId}" could name another job); use e.g. "order-${jobId}"`);
  }
}

/** The job option sizeLimit: refuses data whose JSON is larger, naming the job, the size and the limit. */
export function checkSizeLimit(name: string, json: string, limit: number | undefined): void {
  if (limit === undefined || limit === 0) return; // 0: no limit, as BullMQ reads it
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 0) {
    throw invalid(`sizeLimit must be a whole number of bytes >= 1 (0 or none: no limit), got ${String(limit)}`);
  }
  const size = Buffer.byteLength(json);
  if (size > limit) {
    throw new PayloadTooLargeError('ERR_TOO_LARGE', `job "${name}": data is ${size} bytes of JSON, over its sizeLimit of ${limit} bytes; send smaller data (or raise sizeLimit)`, true);
  }
}
