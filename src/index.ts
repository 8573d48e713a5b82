/** glidemq: a durable job queue on Valkey. */
export { Queue, type QueueOptions, type JobCounts } from './engine/queue.js';
export { Worker, type WorkerOptions, type Processor } from './engine/worker.js';
export type { WorkerInfo } from './engine/worker-registry.js';
export type { RateLimiterOptions } from './engine/worker-options.js';
export { Job, type JobState } from './engine/job.js';
export type { JobType, JobStateName } from './engine/job-queries.js';
export type { RetryOptions, RetryJobsOptions } from './engine/job-edits.js';
export { QueueEvents, type QueueEventsOptions, type QueueEventsListener } from './engine/queue-events.js';
export type { JobOptions, BackoffOptions, Retention } from './engine/options.js';
export type { GroupOptions, TokenBucketOptions, GroupState } from './engine/groups.js';
export * from './engine/errors.js';
export { ListenerError } from './engine/safe-emitter.js';
export {
  LIBRARY_VERSION,
  LIBRARY_NAME,
  installLibrary,
  libraryStatus,
  type InstallResult,
  type LibraryState,
  type NodeLibrary,
} from './engine/library.js';
export { QueueKeys, BroadcastKeys } from './engine/keys.js';
export type { QueueMetrics, MinuteMetrics, MetricsRange } from './engine/metrics.js';
export {
  Maintenance, MaintenanceSession, type ReclaimResult, type ReclaimReport, type ReclaimOptions, type Claims, type StreamClaim,
  type ListClaim, type HealReport, type HealStep,
} from './engine/maintenance.js';
export { listQueues } from './engine/discovery.js';
export type { SchedulerInfo, SchedulerTemplate, SchedulerTiming, RepeatOptions, JobSchedulerJson, JobSchedulerTemplate } from './engine/schedulers.js';
export type { CleanState, CleanResult, DrainResult, ObliterateOptions, ObliterateResult } from './engine/cleanup.js';
export type { DedupOptions, DedupMode } from './engine/options.js';
export type { DeduplicationOptions, KeepJobs } from './engine/options.js';
export { BackoffStrategyError, type BackoffStrategy, type AdvancedSettings } from './engine/backoff.js';
export { Broadcast, type BroadcastOptions, type BroadcastMessage, type SubscriptionInfo } from './engine/broadcast.js';
export { BroadcastWorker, type BroadcastWorkerOptions, type BroadcastProcessor } from './engine/broadcast-worker.js';
export { matchSubject, validateSubject, validatePattern } from './engine/subjects.js';
