/**
 * What QueueEvents emits for one entry of the queue's events stream: the BullMQ event names and
 * argument shapes (QueueEventsListener) and `translate`, which turns an entry's stored fields
 * (lua/helpers.lua emit: `event`, `jobId`, the event's own fields) into the event or events it
 * stands for. Kept apart from the reading (queue-events.ts) because it is pure: no connection,
 * no state, only the entry, what was looked up for it, and the emit to call.
 */

/** The events and their arguments (BullMQ's QueueEventsListener, plus glidemq's `retrying` and `debounced`). */
export interface QueueEventsListener<R = any> {
  /** A job was claimed by a worker (written only while a QueueEvents listens). */
  active: (args: { jobId: string; prev?: string }, id: string) => void;
  added: (args: { jobId: string; name: string }, id: string) => void;
  cleaned: (args: { count: string }, id: string) => void;
  /** `returnvalue` is parsed from its JSON; undefined for an event written while no QueueEvents listened. */
  completed: (args: { jobId: string; returnvalue: R; prev?: string }, id: string) => void;
  /** An add named the custom jobId of an existing job and was ignored. */
  duplicated: (args: { jobId: string }, id: string) => void;
  /** An add with `deduplicationId` was folded into job `jobId` (no new job was created);
   * `deduplicatedJobId` is the id that add took (its custom jobId, or one from the counter). */
  deduplicated: (args: { jobId: string; deduplicationId: string; deduplicatedJobId: string }, id: string) => void;
  /** glidemq's debounce mode: the waiting delayed job `jobId` took a later add's data and delay. */
  debounced: (args: { jobId: string; debounceId: string }, id: string) => void;
  /** `delay` is when the job is due: ms since the epoch, on the server's clock. */
  delayed: (args: { jobId: string; delay: number }, id: string) => void;
  drained: (id: string) => void;
  error: (err: Error) => void;
  failed: (args: { jobId: string; failedReason: string; prev?: string }, id: string) => void;
  paused: (args: object, id: string) => void;
  progress: (args: { jobId: string; data: unknown }, id: string) => void;
  removed: (args: { jobId: string; prev?: string }, id: string) => void;
  resumed: (args: object, id: string) => void;
  'retries-exhausted': (args: { jobId: string; attemptsMade: string }, id: string) => void;
  /** glidemq: an attempt failed and the job will run again (then `waiting`, or `delayed` after a backoff). */
  retrying: (args: { jobId: string; failedReason: string }, id: string) => void;
  stalled: (args: { jobId: string }, id: string) => void;
  waiting: (args: { jobId: string; prev?: string }, id: string) => void;
  /** A parent waits for its children (BullMQ's flows: added so, or by moveToWaitingChildren). */
  'waiting-children': (args: { jobId: string }, id: string) => void;
}

export type EventName<R> = keyof QueueEventsListener<R>;

/** How translate hands out an event: the QueueEvents' own emit. */
export type EmitEvent = (event: string, ...args: unknown[]) => unknown;

/**
 * Emits the BullMQ event(s) one stream entry stands for. `f` is the entry's fields (record),
 * `looked` the job's name, state, ts and delay when lookupAdded read them for an `added` entry.
 */
export function translate(id: string, f: Record<string, string>, looked: (string | null)[] | undefined, emit: EmitEvent): void {
  const jobId = f.jobId ?? '';
  switch (f.event) {
    case 'added': {
      emit('added', { jobId, name: f.name ?? looked?.[0] ?? '' }, id);
      // a parent waits for its children: its own 'waiting-children' entry follows (lua/flow.lua)
      if (f.waitingChildren === '1') return;
      // the due time: the job's own ts + delay while its hash is there; the entry's time once it is gone
      const added = looked?.[2] ? Number(looked[2]) : entryMs(id);
      const delay = f.delay !== undefined ? added + Number(f.delay) : looked?.[1] === 'delayed' ? Number(looked[2]) + Number(looked[3]) : NaN;
      if (Number.isFinite(delay)) emit('delayed', { jobId, delay }, id);
      else emit('waiting', { jobId }, id);
      return;
    }
    case 'waiting':
      // a step job parked with no delay (lua/step.lua)
      emit('waiting', { jobId, prev: f.prev ?? 'active' }, id);
      return;
    case 'delayed':
      // lua/step.lua writes the delay from the server's now: made absolute by the entry's time
      emit('delayed', { jobId, delay: entryMs(id) + Number(f.delay ?? 0) }, id);
      return;
    case 'active':
      emit('active', { jobId, prev: f.prev ?? 'waiting' }, id);
      return;
    case 'progress':
      emit('progress', { jobId, data: parse(f.data) }, id);
      return;
    case 'completed':
      emit('completed', { jobId, returnvalue: f.returnvalue === undefined ? undefined : parse(f.returnvalue), prev: 'active' }, id);
      return;
    case 'failed':
      emit('failed', { jobId, failedReason: f.reason ?? f.failedReason ?? '', prev: 'active' }, id);
      return;
    case 'retries-exhausted':
      emit('retries-exhausted', { jobId, attemptsMade: f.attemptsMade ?? '' }, id);
      return;
    case 'retrying': {
      // lua/finish.lua: a failed attempt with attempts left, run again at once or after `delay`
      emit('retrying', { jobId, failedReason: f.reason ?? '' }, id);
      if (f.delay !== undefined) emit('delayed', { jobId, delay: entryMs(id) + Number(f.delay) }, id);
      else emit('waiting', { jobId, prev: 'active' }, id);
      return;
    }
    case 'stalled':
      emit('stalled', { jobId }, id);
      return;
    case 'removed':
      emit('removed', { jobId, prev: f.prev }, id);
      return;
    case 'duplicated':
      emit('duplicated', { jobId }, id);
      return;
    // (dedupId: the field's name in entries written before BullMQ's names were used)
    case 'deduplicated':
      emit('deduplicated', dedupArgs(jobId, f), id);
      return;
    case 'debounced': {
      const args = dedupArgs(jobId, f);
      emit('deduplicated', args, id);
      emit('debounced', { jobId, debounceId: args.deduplicationId }, id);
      return;
    }
    case 'drained':
      emit('drained', id);
      return;
    case 'paused':
    case 'resumed':
      emit(f.event, {}, id);
      return;
    case 'cleaned':
      emit('cleaned', { count: f.count ?? '0' }, id);
      return;
    default: {
      // an event this version does not know (or 'skipped'): its fields as they are
      if (!f.event || f.event === 'error') return;
      const { event, ...args } = f;
      emit(event, args, id);
    }
  }
}

/** A stream entry's field, value, ... list as a record. */
export function record(fields: string[]): Record<string, string> {
  const r: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) r[fields[i]] = fields[i + 1];
  return r;
}

/** JSON text as its value; text that is not JSON as it is. */
export function parse(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** A dedup event's arguments, BullMQ's names, from its entry's fields (lua/dedup.lua applyDedup). */
function dedupArgs(jobId: string, f: Record<string, string>): { jobId: string; deduplicationId: string; deduplicatedJobId: string } {
  return { jobId, deduplicationId: f.deduplicationId ?? f.dedupId ?? '', deduplicatedJobId: f.deduplicatedJobId ?? '' };
}

/** The server time (ms) a stream entry id was made at. */
function entryMs(id: string): number {
  return Number(id.split('-')[0]);
}
