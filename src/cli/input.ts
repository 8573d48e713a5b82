/** Reading what users pipe in: stdin as strict UTF-8, JSON arguments, NDJSON lines with their numbers. */
import { invalid } from '../engine/shared/errors.js';
import type { BulkJob, JobOptions } from '../engine/producing/options.js';

export async function readStdin(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export function parseJsonArgument(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw invalid(`${what} is not valid JSON (${(err as Error).message}): ${abbreviate(text)}`);
  }
}

function abbreviate(text: string): string {
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

export interface NdjsonLine extends BulkJob {
  line: number;
}

/**
 * Parses NDJSON input completely; a bad line throws an error naming its number before anything
 * is enqueued. Blank lines are skipped. With `envelope`, each line is {name, data, opts}.
 */
export function parseNdjson(input: Buffer, envelope: boolean, defaults: { name: string; opts: JobOptions }): NdjsonLine[] {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(input);
  } catch {
    const line = firstInvalidUtf8Line(input);
    throw invalid(`line ${line}: input is not valid UTF-8 text`);
  }
  const out: NdjsonLine[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    // (no regex or trim per line: this loop runs once per job, and JSON.parse skips the
    // whitespace around a value, a trailing \r included; a line it refuses may be blank)
    const raw = lines[i];
    const lineNo = i + 1;
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch (err) {
      if (raw.trim() === '') continue;
      throw invalid(`line ${lineNo}: not valid JSON (${jsonError(raw.endsWith('\r') ? raw.slice(0, -1) : raw, err)})`);
    }
    if (!envelope) {
      out.push({ line: lineNo, name: defaults.name, data: value, opts: defaults.opts });
      continue;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw invalid(`line ${lineNo}: an envelope must be an object {"name", "data", "opts"}`);
    }
    const env = value as { name?: unknown; data?: unknown; opts?: unknown };
    const extra = Object.keys(env).filter((key) => !['name', 'data', 'opts'].includes(key));
    if (extra.length) throw invalid(`line ${lineNo}: unknown envelope field "${extra[0]}" (expected name, data, opts)`);
    if (env.name !== undefined && (typeof env.name !== 'string' || env.name === '')) {
      throw invalid(`line ${lineNo}: "name" must be a non-empty string`);
    }
    if (env.opts !== undefined && (typeof env.opts !== 'object' || env.opts === null || Array.isArray(env.opts))) {
      throw invalid(`line ${lineNo}: "opts" must be an object`);
    }
    out.push({
      line: lineNo,
      name: (env.name as string | undefined) ?? defaults.name,
      // no "data": {} as for an add without data; a null is the job's data (export writes it so)
      data: env.data === undefined ? {} : env.data,
      opts: { ...defaults.opts, ...(env.opts as JobOptions | undefined) },
    });
  }
  return out;
}

/** JSON.parse's message for `text` (which it refused as `err`): it quotes the text, so without the \r of a CRLF line. */
function jsonError(text: string, err: unknown): string {
  try {
    JSON.parse(text);
  } catch (e) {
    return (e as Error).message;
  }
  return (err as Error).message;
}

function firstInvalidUtf8Line(buf: Buffer): number {
  let line = 1;
  let start = 0;
  for (let i = 0; i <= buf.length; i++) {
    if (i === buf.length || buf[i] === 0x0a) {
      try {
        new TextDecoder('utf-8', { fatal: true }).decode(buf.subarray(start, i));
      } catch {
        return line;
      }
      line++;
      start = i + 1;
    }
  }
  return line;
}
