/**
 * Search: the jobs of one state whose failure reason, name or data holds a text, found on the
 * server one bounded step at a time (lua/search.lua glidemq_searchJobs): each call looks at up to
 * `count` entries of the state from a cursor and returns only the ids that matched and the cursor
 * to go on from, as SCAN does. Nothing else leaves the server, and no call is long however large
 * the state. Queue.search and `glidemq jobs --grep` read through it.
 */
import type { Client } from '../connecting/connection.js';
import { callFunction } from '../connecting/library.js';
import { invalid } from '../shared/errors.js';
import type { QueueKeys } from '../shared/keys.js';

/** The states a search looks in ('paused': the waiting jobs of a paused queue). */
export const SEARCH_STATES = ['waiting', 'paused', 'active', 'delayed', 'prioritized', 'completed', 'failed', 'waiting-children'] as const;
export type SearchState = (typeof SEARCH_STATES)[number];

/** Entries one step looks at unless told (and at most MAX_SEARCH_COUNT). */
export const DEFAULT_SEARCH_COUNT = 100;
export const MAX_SEARCH_COUNT = 1000;
/** Bytes of the text searched for, at most. */
export const MAX_SEARCH_TEXT = 1024;

export interface SearchOptions {
  /** The state to look in. */
  state: SearchState;
  /** The text to find: plain text (no pattern), ASCII case ignored, in failedReason, name and data (its JSON). */
  grep: string;
  /** '0' or nothing to start; else the cursor the last step returned. */
  cursor?: string;
  /** Entries of the state this step looks at (1..1000, default 100); not how many match. */
  count?: number;
}

/** One step: the ids that matched and where to go on ('0': the state was looked at to its end). */
export interface SearchStep {
  ids: string[];
  cursor: string;
}

/** The options checked, with count defaulted. */
export function checkSearch(opts: SearchOptions): Required<SearchOptions> {
  if (!(SEARCH_STATES as readonly string[]).includes(opts.state)) {
    throw invalid(`search: state must be one of ${SEARCH_STATES.join(', ')}, got "${String(opts.state)}"`);
  }
  if (typeof opts.grep !== 'string' || opts.grep === '' || Buffer.byteLength(opts.grep) > MAX_SEARCH_TEXT) {
    throw invalid(`search: grep must be a text of 1 to ${MAX_SEARCH_TEXT} bytes`);
  }
  const count = opts.count ?? DEFAULT_SEARCH_COUNT;
  if (!Number.isSafeInteger(count) || count < 1 || count > MAX_SEARCH_COUNT) {
    throw invalid(`search: count must be a whole number from 1 to ${MAX_SEARCH_COUNT}, got ${String(count)}`);
  }
  return { state: opts.state, grep: opts.grep, cursor: opts.cursor ?? '0', count };
}

/** One step of a search (one read-only server call, FCALL_RO). */
export async function searchStep(client: Client, keys: QueueKeys, opts: SearchOptions): Promise<SearchStep> {
  const o = checkSearch(opts);
  const reply = (await callFunction(client, 'glidemq_searchJobs', keys.meta, [o.state, o.grep, o.cursor, o.count])) as unknown[];
  return { cursor: String(reply[0]), ids: reply.slice(1).map(String) };
}
