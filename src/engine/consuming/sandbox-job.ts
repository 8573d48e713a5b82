/**
 * The job a sandboxed processor gets (in the child): the job's fields, and the calls of BullMQ's
 * SandboxedJob, each a request to the parent, which makes it on the real Job under the claim and
 * answers (progress and logs thus reach the server through the parent). The local fields follow
 * what the calls changed (progress, data).
 */
import type { SandboxCall, WireJob } from './sandbox-protocol.js';

/** Sends a job call to the parent and resolves with its answer (sandbox-child.ts). */
export type CallParent = (op: SandboxCall, args: unknown[]) => Promise<unknown>;

export interface SandboxedJob<D = any> extends WireJob {
  data: D;
  /**
   * The job's options as stored; with tracing on, `telemetry.metadata` is the trace context its
   * add stored (a JSON carrier), the one the Worker's `process` span is a child of: a processor
   * using OpenTelemetry here continues the trace with propagation.extract(ROOT_CONTEXT, JSON.parse(it)).
   */
  opts: { telemetry?: { metadata?: string; links?: string[] }; [option: string]: unknown };
  updateProgress(progress: unknown): Promise<boolean>;
  log(line: string, keep?: number): Promise<number>;
  updateData(data: D): Promise<boolean>;
  clearLogs(keepLogs?: number): Promise<void>;
  moveToDelayed(timestamp: number, nextStepOrToken?: unknown): Promise<void>;
  moveToDelayedIn(delayMs: number, nextStep?: unknown): Promise<void>;
  moveToWaitingChildren(token?: string, opts?: unknown): Promise<boolean>;
  getChildrenValues<T = any>(): Promise<Record<string, T>>;
  getIgnoredChildrenFailures(): Promise<Record<string, string>>;
  getDependenciesCount(opts?: unknown): Promise<Record<string, number>>;
}

/** The job `wire` with its calls going to the parent through `call`. */
export function sandboxedJob(wire: WireJob, callParent: CallParent): SandboxedJob {
  const job = wire as SandboxedJob;
  // an argument left out must arrive left out (JSON would make a trailing undefined a null)
  const call: CallParent = (op, args) => {
    let n = args.length;
    while (n > 0 && args[n - 1] === undefined) n--;
    return callParent(op, n === args.length ? args : args.slice(0, n));
  };
  job.updateProgress = async (progress) => {
    const stored = (await call('updateProgress', [progress])) as boolean;
    if (stored) job.progress = progress;
    return stored;
  };
  job.log = async (line, keep) => (await call('log', keep === undefined ? [line] : [line, keep])) as number;
  job.updateData = async (data) => {
    const stored = (await call('updateData', [data])) as boolean;
    if (stored) job.data = data;
    return stored;
  };
  job.clearLogs = async (keepLogs) => void (await call('clearLogs', [keepLogs]));
  job.moveToDelayed = async (timestamp, nextStepOrToken) => void (await call('moveToDelayed', [timestamp, nextStepOrToken]));
  job.moveToDelayedIn = async (delayMs, nextStep) => void (await call('moveToDelayedIn', [delayMs, nextStep]));
  job.moveToWaitingChildren = async (token, opts) => (await call('moveToWaitingChildren', [token ?? job.token, opts])) as boolean;
  job.getChildrenValues = async () => (await call('getChildrenValues', [])) as Record<string, any>;
  job.getIgnoredChildrenFailures = async () => (await call('getIgnoredChildrenFailures', [])) as Record<string, string>;
  job.getDependenciesCount = async (opts) => (await call('getDependenciesCount', [opts])) as Record<string, number>;
  return job;
}
