/**
 * A parent job's dependencies as BullMQ reads them (job.getChildrenValues, getFailedChildrenValues,
 * getIgnoredChildrenFailures, getDependencies, getDependenciesCount): plain reads of the parent's
 * keys (lua/flow-keys.lua), all in the parent's queue's slot. Children are named by their job keys
 * (`<prefix>:{<queue>}:job:<id>`), where BullMQ names them `<prefix>:<queue>:<id>`.
 */
import type { Client } from '../connecting/connection.js';
import { invalid, UnrecoverableError } from '../shared/errors.js';
import { claimLostError } from './claims.js';
import { refJobKey, type QueueKeys } from '../shared/keys.js';
import { callFunction } from '../connecting/library.js';
import { relayOutbox } from '../producing/flow-outbox.js';
import { pairsToRecord } from '../shared/replies.js';
import { parseJson } from './job-fields.js';

/** Where a parent's dependencies are read: its queue's connection and keys. */
export interface DependencyTarget {
  client: Client;
  keys: QueueKeys;
}

/** One page of a kind of dependency (BullMQ's getDependencies options). */
export interface DependencyPage {
  cursor?: number;
  count?: number;
}

export interface DependenciesOptions {
  processed?: boolean | DependencyPage;
  unprocessed?: boolean | DependencyPage;
  ignored?: boolean | DependencyPage;
  failed?: boolean | DependencyPage;
}

/** getDependencies' answer (BullMQ's shape): each kind asked for, and the cursor of its next page (0: none). */
export interface Dependencies {
  processed?: Record<string, unknown>;
  unprocessed?: string[];
  ignored?: Record<string, string>;
  failed?: string[];
  nextProcessedCursor?: number;
  nextUnprocessedCursor?: number;
  nextIgnoredCursor?: number;
  nextFailedCursor?: number;
}

export interface DependenciesCount {
  processed?: number;
  unprocessed?: number;
  ignored?: number;
  failed?: number;
}

/** The values of the completed children: child job key → return value. */
export async function childrenValues(t: DependencyTarget, id: string): Promise<Record<string, unknown>> {
  const h = await t.client.hgetall(t.keys.processed(id));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(h)) out[k] = parseJson(v, v);
  return out;
}

/** The children that failed with failParentOnFailure or continueParentOnFailure: child job key → reason. */
export function failedChildrenValues(t: DependencyTarget, id: string): Promise<Record<string, string>> {
  return t.client.hgetall(t.keys.failedChildren(id));
}

/** The children that failed with ignoreDependencyOnFailure: child job key → reason. */
export function ignoredChildrenFailures(t: DependencyTarget, id: string): Promise<Record<string, string>> {
  return t.client.hgetall(t.keys.ignored(id));
}

function pageOf(v: boolean | DependencyPage | undefined, what: string): DependencyPage | undefined {
  if (v === undefined || v === false) return undefined;
  if (v === true) return {};
  if (typeof v !== 'object' || v === null) throw invalid(`getDependencies: ${what} must be true or {cursor?, count?}`);
  for (const n of ['cursor', 'count'] as const) {
    if (v[n] !== undefined && (!Number.isSafeInteger(v[n]) || v[n]! < 0)) throw invalid(`getDependencies: ${what}.${n} must be a whole number >= 0`);
  }
  return v;
}

async function hashPage(client: Client, key: string, page: DependencyPage): Promise<[Record<string, string>, number]> {
  const [next, flat] = await client.hscan(key, page.cursor ?? 0, 'COUNT', page.count ?? 20);
  return [pairsToRecord<string>(flat), Number(next)];
}

/**
 * BullMQ's getDependencies: with no options every kind whole; with options, only the kinds named,
 * a page each from its cursor (`count` a hint, as SCAN's), with the cursor of the next page.
 */
export async function dependencies(t: DependencyTarget, id: string, opts: DependenciesOptions = {}): Promise<Dependencies> {
  const none = Object.keys(opts).length === 0;
  if (none) {
    const [processed, unprocessed, ignored, failed] = await Promise.all([
      childrenValues(t, id),
      t.client.smembers(t.keys.deps(id)),
      ignoredChildrenFailures(t, id),
      failedChildrenValues(t, id),
    ]);
    return { processed, unprocessed, ignored, failed: Object.keys(failed) };
  }
  const out: Dependencies = {};
  const processed = pageOf(opts.processed, 'processed');
  if (processed) {
    const [h, next] = await hashPage(t.client, t.keys.processed(id), processed);
    out.processed = {};
    for (const [k, v] of Object.entries(h)) out.processed[k] = parseJson(v, v);
    out.nextProcessedCursor = next;
  }
  const unprocessed = pageOf(opts.unprocessed, 'unprocessed');
  if (unprocessed) {
    const [next, members] = await t.client.sscan(t.keys.deps(id), unprocessed.cursor ?? 0, 'COUNT', unprocessed.count ?? 20);
    out.unprocessed = members;
    out.nextUnprocessedCursor = Number(next);
  }
  const ignored = pageOf(opts.ignored, 'ignored');
  if (ignored) [out.ignored, out.nextIgnoredCursor] = await hashPage(t.client, t.keys.ignored(id), ignored);
  const failed = pageOf(opts.failed, 'failed');
  if (failed) {
    const [h, next] = await hashPage(t.client, t.keys.failedChildren(id), failed);
    out.failed = Object.keys(h);
    out.nextFailedCursor = next;
  }
  return out;
}

/** BullMQ's getDependenciesCount: each kind named (none named: every kind), counted. */
export async function dependenciesCount(t: DependencyTarget, id: string, opts: Partial<Record<keyof DependenciesCount, boolean>> = {}): Promise<DependenciesCount> {
  const all = !opts.processed && !opts.unprocessed && !opts.ignored && !opts.failed;
  const out: DependenciesCount = {};
  const [processed, unprocessed, ignored, failed] = await Promise.all([
    all || opts.processed ? t.client.hlen(t.keys.processed(id)) : undefined,
    all || opts.unprocessed ? t.client.scard(t.keys.deps(id)) : undefined,
    all || opts.ignored ? t.client.hlen(t.keys.ignored(id)) : undefined,
    all || opts.failed ? t.client.hlen(t.keys.failedChildren(id)) : undefined,
  ]);
  if (processed !== undefined) out.processed = processed;
  if (unprocessed !== undefined) out.unprocessed = unprocessed;
  if (ignored !== undefined) out.ignored = ignored;
  if (failed !== undefined) out.failed = failed;
  return out;
}

/** The parent a child's `parents` field names first (BullMQ's job.parent), as id and queue key. */
export function parentOf(parents: string | undefined): { id: string; queueKey: string } | undefined {
  if (!parents) return undefined;
  const first = parents.split(' ')[0];
  const m = /^(.+):job:([^:\s]+)$/.exec(first);
  return m ? { id: m[2], queueKey: m[1] } : undefined;
}

/**
 * Every parent a child's `parents` field names (glide-mq's job.getParents: a DAG node may have
 * several), as { queue: the parent's queue name, id }, in the order stored; [] for none.
 */
export function parentsOf(parents: string | undefined): { queue: string; id: string }[] {
  const out: { queue: string; id: string }[] = [];
  for (const key of (parents ?? '').split(' ')) {
    const m = /^(.+):\{([^{}]+)\}:job:([^:\s]+)$/.exec(key);
    if (m) out.push({ queue: m[2], id: m[3] });
  }
  return out;
}

/** Every parent of job `id` as { queue, id } ([] for a job without parents), read from its hash. */
export async function parentsOfJob(t: DependencyTarget, id: string): Promise<{ queue: string; id: string }[]> {
  return parentsOf((await t.client.hget(t.keys.job(id), 'parents')) ?? undefined);
}

/**
 * The server side of job.moveToWaitingChildren under claim `c`: true when the parent now waits
 * for its children, false when none is left to wait for (or `child` settled already). Throws a
 * StaleClaimError when the claim is no longer this worker's, and an UnrecoverableError naming a
 * failParentOnFailure child that failed while the parent ran (BullMQ marks it lazily).
 */
export async function waitForChildren(
  c: { client: Client; keys: QueueKeys; fence: string; consumer: string },
  id: string,
  child: { id: string; queue: string } | undefined,
): Promise<boolean> {
  const childKey = child === undefined ? '' : refJobKey(child, c.keys.prefix, 'child');
  const r = await callFunction(c.client, 'glidemq_moveToWaitingChildren', c.keys.meta, [id, c.fence, c.consumer, childKey]);
  if (r === 'stale') throw claimLostError(id);
  if (typeof r === 'string' && r.startsWith('failed:')) throw new UnrecoverableError(`child ${r.slice('failed:'.length)} failed`);
  return r === 'waiting';
}

/**
 * Takes child `id` out of its parents' dependencies (job.removeChildDependency): false when it had
 * no parent. A parent in another queue is settled through the child's queue's outbox, relayed here.
 */
export async function unlinkFromParents(t: DependencyTarget, id: string): Promise<boolean> {
  const r = (await callFunction(t.client, 'glidemq_removeChildDependency', t.keys.meta, [id])) as number[];
  if (Number(r[1]) === 1) await relayOutbox(t.client, t.keys.meta, 0);
  return Number(r[0]) === 1;
}
