/**
 * The producer spans of a traced Queue's adds (README "Tracing"): one per add, one per bulk. Made
 * only for a Queue with the `telemetry` option; a Queue without it never reaches this file's code,
 * and @opentelemetry/api is loaded (shared/telemetry.ts) at the first traced add.
 */
import type { Job } from '../jobs/job.js';
import type { JobOptions } from '../producing/options.js';
import { storedMetadataOf, type Telemetry } from '../shared/telemetry.js';

type Carrier = JobOptions['telemetry'];
type Parent = NonNullable<JobOptions['parent']>;

export class AddTracing {
  /**
   * `readParentOpts`: the stored `opts` field of an existing parent (one read, made only for a
   * traced add with the `parent` option).
   */
  constructor(
    private readonly telemetry: Telemetry,
    private readonly queueName: string,
    private readonly readParentOpts: (parent: Parent) => Promise<string | null>,
  ) {}

  /**
   * add() in a producer span whose context the job stores: `write` is given the carrier. `opts`
   * are the job's options with the queue's defaults.
   */
  async add(name: string, opts: JobOptions, write: (telemetry: Carrier) => Promise<Job>): Promise<Job> {
    const tracing = this.telemetry.loaded ?? (await this.telemetry.load());
    const link = opts.parent === undefined ? undefined : await this.parentLink(opts.parent);
    return tracing.produce('add', this.queueName, { 'glidemq.job.name': name }, opts.telemetry, write, (job) => ({
      'messaging.message.id': job.id,
    }), link);
  }

  /**
   * A bulk add in one producer span (one span, not one per job), whose context every job of the
   * bulk stores: it rides in as a default option, so jobs that share their options still share them.
   */
  async bulk<T>(count: number, write: (telemetry: Carrier) => Promise<T>, ids: (r: T) => string[]): Promise<T> {
    const tracing = this.telemetry.loaded ?? (await this.telemetry.load());
    return tracing.produce('addBulk', this.queueName, { 'messaging.batch.message_count': count }, undefined, write, (r) => ({
      'glidemq.job.ids': ids(r).slice(0, 128),
    }));
  }

  /**
   * A traced child's link to its existing parent: the trace context the parent's add stored. None
   * when the parent stored none or cannot be read: the add itself then says what is wrong with it.
   */
  private async parentLink(parent: Parent): Promise<{ metadata: string; attributes: { 'glidemq.parent.id': string } } | undefined> {
    try {
      const metadata = storedMetadataOf(await this.readParentOpts(parent));
      return metadata === undefined ? undefined : { metadata, attributes: { 'glidemq.parent.id': parent.id } };
    } catch {
      return undefined;
    }
  }
}
