/**
 * OpenTelemetry spans of glidemq (README "Tracing"), loaded only by telemetry.ts's dynamic import
 * when an object was made with the `telemetry` option: nothing else imports this file, so
 * @opentelemetry/api is never loaded while tracing is off.
 *
 * - An add is a PRODUCER span `add <queue>` in the caller's context; its trace context (the API's
 *   propagation, else a W3C traceparent of its own) is stored with the job in its options
 *   (`opts.telemetry.metadata`, BullMQ's place), so no server call changes.
 * - A bulk add is one span `addBulk <queue>` whose context every job of the bulk stores: a bulk of
 *   thousands of jobs makes one span, not thousands that say the same thing, and the jobs keep
 *   their shared options (the bulk's fast path).
 * - A flow is one span `addFlow <queue>` with a short `create <queue>` span per job: each job stores
 *   its own, and a parent's is linked to its children's (and the parent stores them, so its
 *   processing span links them too).
 * - Each run of a job is a CONSUMER span `process <queue>`, a child of the context its add stored,
 *   made in a context of its own (never the worker loop's): a retry is a new span beside the
 *   earlier ones, its attempt in `glidemq.job.attempt`. A failure records the exception and sets
 *   the status to ERROR. A batch (the Worker's `batch`) is one span linked to each job's add.
 */
import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type SpanContext,
  type Tracer,
} from '@opentelemetry/api';

/** What a job stores of its trace (telemetry.ts JobTelemetry). */
interface StoredTrace {
  metadata?: string;
  omitContext?: boolean;
  links?: string[];
}

/** What a span needs of a job. */
export interface TracedJob {
  id: string;
  name: string;
  attemptsMade: number;
  opts: { attempts?: number; telemetry?: StoredTrace };
}

/** A flow job, as flows/flow-nodes.ts FlowNode holds it. */
export interface TracedNode {
  queueName: string;
  id: string;
  name: string;
  opts: { telemetry?: StoredTrace };
  deps: string[];
}

/** The most links a span gets (OpenTelemetry's default limit), and a parent stores. */
const MAX_LINKS = 128;
const STORED_LINKS = 32;

const SYSTEM = 'glidemq';

export class Tracing {
  readonly tracer: Tracer;

  constructor(setting: { tracer?: unknown; tracerName: string }) {
    this.tracer = (setting.tracer as Tracer | undefined) ?? trace.getTracer(setting.tracerName);
  }

  /**
   * An add's producer span around `write`, which is given what the jobs store of the trace
   * (undefined with BullMQ's omitContext) and runs in the span's context. `own` is the job
   * option `telemetry` of a single add (its metadata wins over the span's, as BullMQ's does);
   * `done` names what was added once it resolves. `link`: a trace context the span links (a child
   * added to an existing parent links the parent's add).
   */
  async produce<T>(
    operation: 'add' | 'addBulk',
    queue: string,
    attributes: Attributes,
    own: StoredTrace | undefined,
    write: (stored: StoredTrace | undefined) => Promise<T>,
    done: (result: T) => Attributes,
    link?: { metadata: string; attributes: Attributes },
  ): Promise<T> {
    const linked = link === undefined ? undefined : trace.getSpanContext(contextOf(link.metadata));
    const span = this.tracer.startSpan(`${operation} ${queue}`, {
      kind: SpanKind.PRODUCER,
      attributes: { ...messaging(queue, 'send', operation), ...attributes },
      links: linked ? [{ context: linked, attributes: link!.attributes }] : undefined,
    }, context.active());
    const ctx = trace.setSpan(context.active(), span);
    const metadata = own?.omitContext ? undefined : own?.metadata ?? carrierOf(ctx);
    const stored = metadata === undefined ? undefined : { metadata };
    return settle(span, context.with(ctx, () => write(stored)), done);
  }

  /**
   * A flow's span `addFlow <queue>` around `write`, and one `create <queue>` span per node, whose
   * context the node's options then hold (a parent's also its children's, as links).
   */
  async produceFlow<N extends TracedNode, T>(nodes: N[], keyOf: (n: N) => string, write: () => Promise<T>, done: (result: T) => Attributes): Promise<T> {
    const top = nodes[0]?.queueName ?? '';
    const span = this.tracer.startSpan(`addFlow ${top}`, {
      kind: SpanKind.PRODUCER,
      attributes: { ...messaging(top, 'send', 'addFlow'), 'messaging.batch.message_count': nodes.length },
    }, context.active());
    const ctx = trace.setSpan(context.active(), span);
    const byKey = new Map(nodes.map((n) => [keyOf(n), n]));
    const made = new Map<N, SpanContext | null>();
    // children first, so a parent's span starts with links to theirs (a cycle is refused later by
    // the flow's own check: a node met again while its children are made gets no link)
    const create = (n: N): SpanContext | null => {
      if (made.has(n)) return made.get(n)!;
      made.set(n, null);
      const children = n.deps.map((d) => byKey.get(d)).filter((c): c is N => c !== undefined).map(create);
      const childLinks = children.filter((c): c is SpanContext => c !== null);
      const own = n.opts.telemetry;
      const nodeSpan = this.tracer.startSpan(`create ${n.queueName}`, {
        kind: SpanKind.PRODUCER,
        attributes: { ...messaging(n.queueName, 'create', 'create'), 'messaging.message.id': n.id, 'glidemq.job.name': n.name },
        links: childLinks.slice(0, MAX_LINKS).map((c) => ({ context: c })),
      }, ctx);
      nodeSpan.end();
      const sc = nodeSpan.spanContext();
      const metadata = own?.omitContext ? undefined : own?.metadata ?? carrierOf(trace.setSpan(ctx, nodeSpan));
      if (metadata !== undefined) {
        const stored: StoredTrace = { metadata };
        if (childLinks.length) stored.links = childLinks.slice(0, STORED_LINKS).map(traceparentOf);
        n.opts = { ...n.opts, telemetry: stored };
      } else if (own) n.opts = { ...n.opts, telemetry: undefined };
      made.set(n, sc);
      return sc;
    };
    for (const n of nodes) create(n);
    return settle(span, context.with(ctx, write), done);
  }

  /**
   * One run of `job`: a consumer span, the child of the context its add stored (a root span when
   * it stored none), around `run`, which runs in the span's context.
   */
  process<T>(queue: string, consumer: string, job: TracedJob, run: () => T | Promise<T>): Promise<T> {
    const stored = job.opts.telemetry;
    const parent = stored === undefined ? ROOT_CONTEXT : this.parentOf(stored.metadata);
    // (one object literal: this is made for every run of every job)
    const attributes: Attributes = {
      'messaging.system': SYSTEM,
      'messaging.destination.name': queue,
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'process',
      'messaging.message.id': job.id,
      'messaging.client.id': consumer,
      'glidemq.job.name': job.name,
      'glidemq.job.attempt': job.attemptsMade + 1,
      'glidemq.job.attempts': job.opts.attempts ?? 1,
    };
    const links = stored?.links === undefined ? undefined : linksOf(stored.links);
    const span = this.tracer.startSpan(`process ${queue}`, { kind: SpanKind.CONSUMER, attributes, links }, parent);
    return settle(span, context.with(trace.setSpan(parent, span), run));
  }

  /** The last carrier read and its context: the jobs of a bulk share theirs. */
  private lastMetadata: string | undefined;
  private lastParent: Context = ROOT_CONTEXT;

  private parentOf(metadata: string | undefined): Context {
    if (metadata !== this.lastMetadata) {
      this.lastParent = contextOf(metadata);
      this.lastMetadata = metadata;
    }
    return this.lastParent;
  }

  /** One run of a batch: a consumer span linked to the add of each of its jobs, around `run`. */
  async processBatch<T>(queue: string, consumer: string, jobs: TracedJob[], run: () => T | Promise<T>): Promise<T> {
    const links: Link[] = [];
    for (const job of jobs) {
      if (links.length >= MAX_LINKS) break;
      const sc = trace.getSpanContext(contextOf(job.opts.telemetry?.metadata));
      if (sc) links.push({ context: sc, attributes: { 'messaging.message.id': job.id } });
    }
    const span = this.tracer.startSpan(`process ${queue}`, {
      kind: SpanKind.CONSUMER,
      attributes: {
        ...messaging(queue, 'process', 'process'),
        'messaging.batch.message_count': jobs.length,
        'messaging.client.id': consumer,
        'glidemq.job.ids': jobs.slice(0, MAX_LINKS).map((j) => j.id),
      },
      links,
    }, ROOT_CONTEXT);
    return settle(span, context.with(trace.setSpan(ROOT_CONTEXT, span), run));
  }
}

/** The conventional messaging attributes of a span. */
function messaging(queue: string, type: string, name: string): Attributes {
  return {
    'messaging.system': SYSTEM,
    'messaging.destination.name': queue,
    'messaging.operation.type': type,
    'messaging.operation.name': name,
  };
}

/**
 * Ends `span` when `work` settles: with `done`'s attributes and status OK, or the exception
 * recorded and status ERROR (a RateLimitError is no failure: the job goes back, unattempted).
 */
async function settle<T>(span: Span, work: Promise<T> | T, done?: (result: T) => Attributes): Promise<T> {
  try {
    const result = await work;
    if (done) span.setAttributes(done(result));
    span.setStatus({ code: SpanStatusCode.OK });
    return result;
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err));
    if (e.name === 'RateLimitError') span.addEvent('rate limited: the job goes back to the queue');
    else {
      span.recordException(e);
      span.setStatus({ code: SpanStatusCode.ERROR, message: e.message });
    }
    throw err;
  } finally {
    span.end();
  }
}

/**
 * The trace context of `ctx` as a JSON carrier: what the registered propagator writes, and a W3C
 * traceparent of the span's own when it wrote none (no propagator is registered, or another
 * format), so the worker can always restore it. Undefined when there is no context to carry (no
 * tracer provider is registered: its spans are no-ops): then nothing is stored.
 */
function carrierOf(ctx: Context): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  if (carrier.traceparent === undefined) {
    const sc = trace.getSpanContext(ctx);
    if (sc && trace.isSpanContextValid(sc)) carrier.traceparent = traceparentOf(sc);
  }
  return Object.keys(carrier).length ? JSON.stringify(carrier) : undefined;
}

/** The context a stored carrier names (the registered propagator's, else its traceparent), or the root. */
function contextOf(metadata: string | undefined): Context {
  if (typeof metadata !== 'string' || metadata === '') return ROOT_CONTEXT;
  let carrier: Record<string, string>;
  try {
    carrier = JSON.parse(metadata) as Record<string, string>;
  } catch {
    return ROOT_CONTEXT; // not ours (or corrupt): the run starts a trace of its own
  }
  if (typeof carrier !== 'object' || carrier === null) return ROOT_CONTEXT;
  const ctx = propagation.extract(ROOT_CONTEXT, carrier);
  if (trace.getSpanContext(ctx)) return ctx;
  const sc = parseTraceparent(carrier.traceparent);
  return sc ? trace.setSpanContext(ROOT_CONTEXT, sc) : ROOT_CONTEXT;
}

function linksOf(stored: string[] | undefined): Link[] | undefined {
  if (!Array.isArray(stored) || stored.length === 0) return undefined;
  const links: Link[] = [];
  for (const tp of stored) {
    const sc = parseTraceparent(tp);
    if (sc) links.push({ context: sc });
  }
  return links;
}

function traceparentOf(sc: SpanContext): string {
  return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 1).toString(16).padStart(2, '0')}`;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

function parseTraceparent(tp: unknown): SpanContext | undefined {
  const m = typeof tp === 'string' ? TRACEPARENT.exec(tp) : null;
  if (!m) return undefined;
  const sc: SpanContext = { traceId: m[1], spanId: m[2], traceFlags: parseInt(m[3], 16), isRemote: true };
  return trace.isSpanContextValid(sc) ? sc : undefined;
}
