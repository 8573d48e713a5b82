/** glidemq: a durable job queue on Valkey. */
export { Queue, type QueueOptions, type JobCounts } from './engine/queue/queue.js';
export type { RevokeResult } from './engine/administering/revoke.js';
export { Worker, type WorkerOptions, type Processor } from './engine/consuming/worker.js';
export type { BatchProcessor } from './engine/consuming/batch-runner.js';
export type { BatchOptions } from './engine/consuming/batch-options.js';
export type { WorkerInfo, WorkerRequest } from './engine/consuming/worker-registry.js';
export type { RateLimiterOptions } from './engine/consuming/worker-options.js';
export type { SandboxOptions } from './engine/consuming/sandbox-options.js';
export type { SandboxedJob } from './engine/consuming/sandbox-job.js';
export { Job, type JobState } from './engine/jobs/job.js';
export type { JobType, JobStateName } from './engine/inspecting/job-queries.js';
export type { SearchOptions, SearchState } from './engine/inspecting/job-search.js';
export type { RetryOptions, RetryJobsOptions } from './engine/jobs/job-edits.js';
export { QueueEvents, type QueueEventsOptions, type QueueEventsListener } from './engine/inspecting/queue-events.js';
export type { JobOptions, BackoffOptions, Retention, ParentOptions } from './engine/producing/options.js';
export { FlowProducer, type FlowProducerOptions, type JobNode, type NodeOpts } from './engine/flows/flow-producer.js';
export type { FlowJob, FlowOpts } from './engine/flows/flow-nodes.js';
export { CycleError, type DAGNode, type DAGFlow, type DAGJobOptions } from './engine/flows/dag-nodes.js';
export { dag, chain, group, chord, type WorkflowJobDef, type WorkflowConnection, type ClosableWorkflow, type WorkflowOptions } from './engine/flows/dag.js';
export type { Dependencies, DependenciesCount, DependenciesOptions } from './engine/jobs/job-dependencies.js';
export type { GroupOptions, TokenBucketOptions, GroupState } from './engine/producing/groups.js';
export * from './engine/shared/errors.js';
export { ListenerError } from './engine/shared/safe-emitter.js';
export {
  LIBRARY_VERSION,
  LIBRARY_NAME,
  installLibrary,
  libraryStatus,
  type InstallResult,
  type LibraryState,
  type NodeLibrary,
} from './engine/connecting/library.js';
export { QueueKeys, BroadcastKeys } from './engine/shared/keys.js';
export type { QueueMetrics, MinuteMetrics, MetricsRange } from './engine/inspecting/metrics.js';
export {
  Maintenance, MaintenanceSession, type ReclaimResult, type ReclaimReport, type ReclaimOptions, type Claims, type StreamClaim,
  type ListClaim, type HealReport, type HealStep,
} from './engine/administering/maintenance.js';
export { listQueues } from './engine/connecting/discovery.js';
export type { SchedulerInfo, SchedulerTemplate, SchedulerTiming, RepeatOptions, JobSchedulerJson, JobSchedulerTemplate } from './engine/scheduling/schedulers.js';
export type { CleanState, CleanResult, DrainResult, ObliterateOptions, ObliterateResult } from './engine/administering/cleanup.js';
export type { DeadLetterQueueOptions } from './engine/administering/dead-letters.js';
export { resendDeadLetters, type ResendResult, type SentLetter } from './engine/operating/dead-letters.js';
export type { DedupOptions, DedupMode } from './engine/producing/options.js';
export type { DeduplicationOptions, KeepJobs } from './engine/producing/options.js';
export { BackoffStrategyError, type BackoffStrategy, type AdvancedSettings } from './engine/consuming/backoff.js';
export { Broadcast, type BroadcastOptions, type BroadcastMessage, type SubscriptionInfo } from './engine/broadcast/broadcast.js';
export { BroadcastWorker, type BroadcastWorkerOptions, type BroadcastProcessor } from './engine/broadcast/broadcast-worker.js';
export { matchSubject, validateSubject, validatePattern } from './engine/shared/subjects.js';
export type { ConfirmOptions } from './engine/producing/confirm.js';
export type { TelemetryOption, TracerLike, JobTelemetry } from './engine/shared/telemetry.js';
