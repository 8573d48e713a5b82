/**
 * Adding many jobs (Queue.addBulk, `glidemq enqueue --ndjson`). Every job is validated and encoded
 * before the first write. Then runs of jobs that share their name and every option, and need no
 * custom id, dedup or group, go through glidemq_addData: only their data is sent, and the server
 * stores each with far less work than glidemq_add's twelve arguments per job. The other jobs go
 * through glidemq_add. The calls are pipelined with a bounded number in flight, so this process
 * encodes the next call while the server runs the ones before it (one call at a time would leave
 * each side idle while the other works). Every call is numbered by the queue's Producer: a call
 * re-sent after its reply was lost stores nothing twice (lua/producers.lua).
 */
import type { Client } from '../connecting/connection.js';
import { InternalError, invalid } from '../shared/errors.js';
import { confirmedCall, type Confirm } from './confirm.js';
import { encodeJob, withDefaults, type BulkJob, type JobOptions } from './options.js';
import type { Producer } from './producer.js';

/** Jobs per glidemq_addData call: ~3 ms of server time (a call blocks the server while it runs). */
const DATA_CHUNK = 500;
/** Jobs per glidemq_add call. */
const ADD_CHUNK = 200;
/** A shorter run of alike jobs rides in the glidemq_add calls around it (no call of a few jobs). */
const MIN_RUN = 16;
/** Calls sent and not yet answered, at most: enough that the server always has the next one. */
const IN_FLIGHT = 8;

/** Where a bulk goes: the queue's connection, meta key, producer and payload limit. */
export interface AddTarget {
  client: Client;
  metaKey: string;
  producer: Producer;
  maxPayload: number;
  /** Each call confirmed (producing/confirm.ts), or none. */
  confirm?: Confirm;
  /** The queue's name, for a confirmation's error. */
  queueName?: string;
}

/** A bulk validated and encoded, ready to send. */
export interface EncodedBulk {
  /**
   * Per job, its 12-field glidemq_add argument group except the data (slot 2 holds ''): one array
   * shared by consecutive jobs that have the same name and options object.
   */
  shapes: (string | number)[][];
  /** Per job, its data as the JSON text stored. */
  datas: string[];
}

/** What the server did with each job of a bulk, in the order of the bulk. */
export interface BulkAdded {
  ids: string[];
  /** glidemq_add's codes: 1 created, 0 a job with that custom id existed, 2 deduplicated, 3 debounced. */
  codes: Uint8Array;
  /** The server time (ms) of the call that added the job: the ts of a job it created. */
  ts: Float64Array;
}

/**
 * Validates and encodes every job before anything is written. An error names the job by its
 * 1-based position (`index` on the error, `reason` the message without it), so a caller can map
 * it to a line of its input. Consecutive jobs with the same name and the same options object
 * (NDJSON lines, most bulks) are checked once for their options and then only for their data.
 */
export function encodeBulkJobs(jobs: BulkJob[], defaults: JobOptions | undefined, maxPayload: number): EncodedBulk {
  const n = jobs.length;
  const shapes = new Array<(string | number)[]>(n);
  const datas = new Array<string>(n);
  // a UTF-16 unit is at most 3 bytes of UTF-8: shorter texts need no byte count
  const surelyFits = maxPayload > 0 ? Math.floor(maxPayload / 3) : Infinity;
  let shape: (string | number)[] | undefined;
  let merged: JobOptions = {};
  let lastName: string | undefined;
  let lastOpts: JobOptions | undefined;
  for (let i = 0; i < n; i++) {
    const j = jobs[i];
    try {
      let json: string | undefined;
      if (shape !== undefined && j.name === lastName && j.opts === lastOpts) {
        json = fastJson(j.data);
      }
      if (json === undefined) {
        // the first job of its kind, or data that JSON.stringify refuses: encodeJob says why
        merged = withDefaults(defaults, j.opts);
        const group = encodeJob(j.name, j.data, merged);
        json = String(group[2]);
        group[2] = '';
        // a sizeLimit is checked per job by encodeJob: such jobs are encoded one by one
        shape = merged.sizeLimit ? undefined : group;
        shapes[i] = group;
        lastName = j.name;
        lastOpts = j.opts;
      } else {
        shapes[i] = shape!;
      }
      if (json.length > surelyFits) {
        const size = Buffer.byteLength(json);
        if (size > maxPayload) {
          throw invalid(`payload is ${size} bytes, over the limit of ${maxPayload} bytes; store large data elsewhere and enqueue a reference`);
        }
      }
      datas[i] = json;
    } catch (err) {
      const e = invalid(`job ${i + 1}: ${(err as Error).message}`) as Error & { index?: number; reason?: string };
      e.index = i + 1;
      e.reason = (err as Error).message;
      throw e;
    }
  }
  return { shapes, datas };
}

/** JSON text of a job's data, or undefined when JSON.stringify refuses it (encodeJob then reports). */
function fastJson(data: unknown): string | undefined {
  try {
    return JSON.stringify(data === undefined ? {} : data);
  } catch {
    return undefined;
  }
}

/** Whether a job may go through glidemq_addData: no custom id, dedup or group. */
function plain(s: (string | number)[]): boolean {
  return s[0] === '' && s[8] === '' && s[9] === 0 && s[10] === '' && s[11] === '';
}

/** Whether two plain jobs share name, delay, priority, lifo, attempts and stored options. */
function alike(a: (string | number)[], b: (string | number)[]): boolean {
  return a === b || (a[1] === b[1] && a[3] === b[3] && a[4] === b[4] && a[5] === b[5] && a[6] === b[6] && a[7] === b[7]);
}

interface Call {
  fn: 'glidemq_add' | 'glidemq_addData';
  /** The jobs start..end-1 of the bulk. */
  start: number;
  end: number;
}

/** Splits a bulk into calls, in order: runs of alike plain jobs by glidemq_addData, the rest by glidemq_add. */
function planCalls(shapes: (string | number)[][]): Call[] {
  const calls: Call[] = [];
  let mixedFrom = 0;
  const flushMixed = (to: number) => {
    for (let s = mixedFrom; s < to; s += ADD_CHUNK) calls.push({ fn: 'glidemq_add', start: s, end: Math.min(to, s + ADD_CHUNK) });
  };
  let i = 0;
  while (i < shapes.length) {
    let r = i;
    if (plain(shapes[i])) {
      r = i + 1;
      while (r < shapes.length && alike(shapes[i], shapes[r]) && plain(shapes[r])) r++;
    }
    if (r - i >= MIN_RUN) {
      flushMixed(i);
      for (let s = i; s < r; s += DATA_CHUNK) calls.push({ fn: 'glidemq_addData', start: s, end: Math.min(r, s + DATA_CHUNK) });
      mixedFrom = r;
      i = r;
    } else {
      i = Math.max(r, i + 1);
    }
  }
  flushMixed(shapes.length);
  return calls;
}

function callArgs(call: Call, enc: EncodedBulk, head: (string | number)[]): (string | number)[] {
  const { start, end } = call;
  if (call.fn === 'glidemq_addData') {
    const s = enc.shapes[start];
    const args = [...head, s[1], s[3], s[4], s[5], s[6], s[7], end - start];
    for (let i = start; i < end; i++) args.push(enc.datas[i]);
    return args;
  }
  const args = [...head, end - start];
  for (let i = start; i < end; i++) {
    const s = enc.shapes[i];
    args.push(s[0], s[1], enc.datas[i], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11]);
  }
  return args;
}

/** Writes the reply of `call` into `out`. */
function takeReply(call: Call, reply: (string | number)[], out: BulkAdded): void {
  const ts = Number(reply[0]);
  let at = call.start;
  if (call.fn === 'glidemq_addData') {
    // ts, then runs of consecutive ids: from, to, from, to, ...
    for (let r = 1; r + 1 < reply.length; r += 2) {
      for (let id = Number(reply[r]), to = Number(reply[r + 1]); id <= to && at < call.end; id++, at++) {
        out.ids[at] = String(id);
        out.codes[at] = 1;
        out.ts[at] = ts;
      }
    }
  } else {
    for (let r = 1; r + 1 < reply.length && at < call.end; r += 2, at++) {
      out.ids[at] = String(reply[r]);
      out.codes[at] = Number(reply[r + 1]);
      out.ts[at] = ts;
    }
  }
  if (at !== call.end) throw new InternalError('ERR_INTERNAL', `${call.fn} answered for ${at - call.start} of ${call.end - call.start} jobs (a glidemq bug: please report it)`);
}

/**
 * Sends an encoded bulk in pipelined calls, at most IN_FLIGHT unanswered at a time. When a call
 * fails, no further call is sent; the calls already sent are awaited (their jobs are stored) and
 * the first failure is thrown.
 */
export async function addEncoded(target: AddTarget, enc: EncodedBulk): Promise<BulkAdded> {
  const n = enc.datas.length;
  const out: BulkAdded = { ids: new Array<string>(n), codes: new Uint8Array(n), ts: new Float64Array(n) };
  const inFlight = new Set<Promise<void>>();
  let failed = false;
  let failure: unknown;
  for (const call of planCalls(enc.shapes)) {
    if (inFlight.size >= IN_FLIGHT) await Promise.race(inFlight);
    if (failed) break;
    const p = target.producer.next();
    const what = () => ({ what: `bulk add of ${call.end - call.start} jobs to queue ${target.queueName ?? target.metaKey}` });
    const sent = confirmedCall(target.client, call.fn, target.metaKey, callArgs(call, enc, [target.maxPayload, ...p.args]), target.confirm, what)
      .then((reply) => takeReply(call, reply as (string | number)[], out))
      .catch((err: unknown) => {
        if (!failed) failure = err;
        failed = true;
      })
      .finally(() => {
        p.done();
        inFlight.delete(sent);
      });
    inFlight.add(sent);
  }
  await Promise.all(inFlight);
  if (failed) throw failure;
  return out;
}
