/**
 * The `telemetry` option of Queue, Worker and FlowProducer (README "Tracing"): OpenTelemetry
 * tracing through `@opentelemetry/api`, an optional peer dependency. This file never loads it:
 * with the option off nothing here runs beyond one property check, and with it on the tracing
 * code (tracing.ts, which imports the API) is loaded by a dynamic import the first time a span is
 * made. No type of the API appears here, so the library's types need no OpenTelemetry package.
 */
import { invalid } from './errors.js';

/** The shape of an OpenTelemetry Tracer that glidemq uses (@opentelemetry/api's Tracer fits it). */
export interface TracerLike {
  startSpan(name: string, options?: any, context?: any): any;
}

/**
 * `true`: spans from the global tracer provider (`trace.getTracer('glidemq')`). `{ tracer }`: from
 * that tracer. `{ tracerName }`: the global provider's tracer of that name. BullMQ's telemetry
 * object (`new BullMQOtel(name)` from bullmq-otel) is taken as the global provider too, with its
 * tracerName. `false` or none: no tracing, and @opentelemetry/api is never loaded.
 */
export type TelemetryOption = boolean | { tracer?: TracerLike; tracerName?: string; [other: string]: unknown };

type SpanAttributes = Record<string, string | number | boolean | string[] | undefined>;

/**
 * What tracing.ts's Tracing offers (its class is loaded only with tracing on; named here so the
 * library's types never name @opentelemetry/api).
 */
export interface Tracing {
  produce<T>(operation: 'add' | 'addBulk', queue: string, attributes: SpanAttributes, own: JobTelemetry | undefined,
    write: (stored: JobTelemetry | undefined) => Promise<T>, done: (result: T) => SpanAttributes,
    link?: { metadata: string; attributes: SpanAttributes }): Promise<T>;
  produceFlow<N extends { queueName: string; id: string; name: string; opts: { telemetry?: JobTelemetry }; deps: string[] }, T>(
    nodes: N[], keyOf: (n: N) => string, write: () => Promise<T>, done: (result: T) => SpanAttributes): Promise<T>;
  process<T>(queue: string, consumer: string, job: TracedJob, run: () => T | Promise<T>): Promise<T>;
  processBatch<T>(queue: string, consumer: string, jobs: TracedJob[], run: () => T | Promise<T>): Promise<T>;
}

/** What a span needs of a job. */
export interface TracedJob {
  id: string;
  name: string;
  attemptsMade: number;
  opts: { attempts?: number; telemetry?: JobTelemetry };
}

/** The option checked: the tracer to use, or the global provider's by name. */
export interface TelemetrySetting {
  tracer?: TracerLike;
  tracerName: string;
}

/** What a job stores of its trace (job option `telemetry`, BullMQ's shape, and glidemq's links). */
export interface JobTelemetry {
  /** The add's trace context as a JSON carrier (W3C traceparent, tracestate). */
  metadata?: string;
  /** BullMQ's: the add stores no trace context (the job's processing starts its own trace). */
  omitContext?: boolean;
  /** A flow parent's children: each child's creation span as a traceparent (the parent's processing links them). */
  links?: string[];
}

/** The option checked (undefined: tracing is off); a refusal names where it was given. */
export function checkTelemetry(opt: unknown, where: string): TelemetrySetting | undefined {
  if (opt === undefined || opt === false || opt === null) return undefined;
  if (opt === true) return { tracerName: 'glidemq' };
  if (typeof opt !== 'object' || Array.isArray(opt)) {
    throw invalid(`${where}: telemetry must be true, false or { tracer } (an @opentelemetry/api Tracer), got ${String(opt)}`);
  }
  const o = opt as { tracer?: unknown; tracerName?: unknown; contextManager?: unknown };
  const tracerName = typeof o.tracerName === 'string' && o.tracerName !== '' ? o.tracerName : 'glidemq';
  // BullMQ's telemetry object carries its own context manager and a tracer of another shape: its
  // spans come from the global provider, as bullmq-otel's do
  if (o.contextManager !== undefined) return { tracerName };
  if (o.tracer === undefined) return { tracerName };
  if (typeof o.tracer !== 'object' || o.tracer === null || typeof (o.tracer as TracerLike).startSpan !== 'function') {
    throw invalid(`${where}: telemetry.tracer must be an OpenTelemetry Tracer (trace.getTracer(name) of @opentelemetry/api)`);
  }
  return { tracer: o.tracer as TracerLike, tracerName };
}

/** The job option `telemetry` checked (BullMQ's { metadata?, omitContext? }); what the job stores of it, or undefined. */
export function storedTelemetry(t: unknown): JobTelemetry | undefined {
  if (t === undefined) return undefined;
  if (typeof t !== 'object' || t === null || Array.isArray(t)) throw invalid('telemetry must be an object { metadata?, omitContext? }');
  const { metadata, omitContext, links } = t as JobTelemetry;
  if (omitContext !== undefined && typeof omitContext !== 'boolean') throw invalid(`telemetry.omitContext must be true or false, got ${String(omitContext)}`);
  if (metadata !== undefined && (typeof metadata !== 'string' || metadata.length > 4096)) {
    throw invalid('telemetry.metadata must be a string of at most 4096 characters (a trace context carrier as JSON)');
  }
  if (links !== undefined && (!Array.isArray(links) || links.length > 128 || links.some((l) => typeof l !== 'string' || l.length > 64))) {
    throw invalid('telemetry.links must be at most 128 traceparent strings');
  }
  if (omitContext || metadata === undefined) return undefined;
  return links?.length ? { metadata, links } : { metadata };
}

/** The trace context a job's stored options (its hash's `opts` JSON) carry, if any. */
export function storedMetadataOf(optsJson: string | null | undefined): string | undefined {
  if (typeof optsJson !== 'string') return undefined;
  try {
    const metadata = (JSON.parse(optsJson) as { telemetry?: JobTelemetry } | null)?.telemetry?.metadata;
    return typeof metadata === 'string' && metadata !== '' ? metadata : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A Queue's, Worker's or FlowProducer's tracing: loads tracing.ts (and with it
 * @opentelemetry/api) once, on first use. A missing package is an error that says what to install.
 */
export class Telemetry {
  private loading: Promise<Tracing> | undefined;
  /** The tracing once loaded (a span is then made with no await). */
  loaded: Tracing | undefined;

  constructor(readonly setting: TelemetrySetting) {}

  /** The option, checked: a Telemetry when tracing is on, else undefined. */
  static of(opt: unknown, where: string): Telemetry | undefined {
    const setting = checkTelemetry(opt, where);
    return setting ? new Telemetry(setting) : undefined;
  }

  load(): Promise<Tracing> {
    this.loading ??= import('./tracing.js').then(
      (m) => (this.loaded = new m.Tracing(this.setting)),
      (err: unknown) => {
        this.loading = undefined;
        const e = invalid(`telemetry is on, but @opentelemetry/api could not be loaded (${(err as Error).message}): install it (npm install @opentelemetry/api) or leave telemetry off`);
        throw e;
      },
    );
    return this.loading;
  }
}
