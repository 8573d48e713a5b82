/**
 * What the function fuzz found: failing calls grouped by (function, kind), with the distinct error
 * shapes and the keys changed in each group, and per function how many calls were made and refused.
 */
import type { FuzzCall } from './fuzz-calls.js';

/**
 * keyspace-changed: a refused call changed, added or removed a key. uncoded-error: its error is not
 * `ERR_<CODE> ...` (a raw WRONGTYPE, a Lua runtime error). internal-error: ERR_INTERNAL, the coded
 * net the library throws over a Lua error it did not foresee: a bug all the same, and the error
 * names no argument or key.
 */
export type FailureKind = 'keyspace-changed' | 'uncoded-error' | 'internal-error';

export interface Failure {
  call: FuzzCall;
  kind: FailureKind;
  error: string;
  changed: string[];
}

export function showArg(v: string): string {
  if (v.length > 48) return `<${v.length} bytes ${JSON.stringify(v.slice(0, 12))}...>`;
  return JSON.stringify(v);
}

export function showArgv(argv: string[]): string {
  return `[${argv.map(showArg).join(', ')}]`;
}

/** An error with its variable parts (numbers, quoted values, key names) blanked, to group by. */
export function errorShape(error: string): string {
  return error
    .replace(/"[^"]*"/g, '"…"')
    .replace(/\{[^}]*\}[^\s,]*/g, '{…}')
    .replace(/\d+/g, '#')
    .slice(0, 110);
}

interface Group {
  fn: string;
  kind: FailureKind;
  count: number;
  first: Failure;
  shapes: Map<string, number>;
  keys: Map<string, number>;
}

/** Failures grouped by (function, kind), with the distinct error shapes and changed keys of each. */
export class FailureLog {
  readonly groups = new Map<string, Group>();
  /**
   * Calls made and refused per function (failing or not), and how many of its unbroken ('valid')
   * calls were refused, with one such refusal: many of those mean its template in fuzz-argv.ts no
   * longer matches the function, and the fuzz stops reaching past its argument checks.
   */
  readonly perFunction = new Map<string, { calls: number; refused: number; valid: number; validRefused: number; validError: string }>();
  total = 0;

  count(call: FuzzCall, error: string | undefined): void {
    const c = this.perFunction.get(call.fn) ?? { calls: 0, refused: 0, valid: 0, validRefused: 0, validError: '' };
    c.calls++;
    if (error !== undefined) c.refused++;
    if (call.how === 'valid') {
      c.valid++;
      if (error !== undefined) {
        c.validRefused++;
        c.validError ||= error.slice(0, 160);
      }
    }
    this.perFunction.set(call.fn, c);
  }

  add(f: Failure): void {
    this.total++;
    const id = `${f.call.fn} ${f.kind}`;
    let g = this.groups.get(id);
    if (!g) this.groups.set(id, (g = { fn: f.call.fn, kind: f.kind, count: 0, first: f, shapes: new Map(), keys: new Map() }));
    g.count++;
    const shape = errorShape(f.error);
    g.shapes.set(shape, (g.shapes.get(shape) ?? 0) + 1);
    for (const line of f.changed) {
      const k = line.replace(/:job:[^:\s]+/, ':job:<id>');
      g.keys.set(k, (g.keys.get(k) ?? 0) + 1);
    }
  }

  /** The groups, most frequent first. */
  sorted(): Group[] {
    return [...this.groups.values()].sort((a, b) => b.count - a.count || a.fn.localeCompare(b.fn) || a.kind.localeCompare(b.kind));
  }

  /** A readable account of up to `limit` groups (one example call each). */
  describe(limit = 30): string {
    const lines: string[] = [];
    for (const g of this.sorted().slice(0, limit)) {
      const c = g.first.call;
      lines.push(`  ${g.fn}  ${g.kind}  x${g.count}`);
      lines.push(`      e.g. (${c.how}) argv ${showArgv(c.argv)}${c.mutation ? `  with ${c.mutation.key} := ${c.mutation.type}` : ''}`);
      lines.push(`      error: ${g.first.error.slice(0, 200)}`);
      if (g.first.changed.length) lines.push(`      changed: ${g.first.changed.slice(0, 6).join('; ')}${g.first.changed.length > 6 ? '; ...' : ''}`);
      const more = [...g.shapes].sort((a, b) => b[1] - a[1]).slice(1, 4);
      for (const [shape, n] of more) lines.push(`      also x${n}: ${shape}`);
    }
    if (this.groups.size > limit) lines.push(`  ... and ${this.groups.size - limit} more (function, kind) groups`);
    return lines.join('\n');
  }

  /** Counts per function and kind, one line each (for the report script). */
  table(): string {
    const rows = this.sorted().map((g) => `  ${g.fn.padEnd(34)} ${g.kind.padEnd(17)} ${String(g.count).padStart(6)}   ${g.shapes.size} error shape(s)`);
    return rows.join('\n');
  }

  /** Per function: calls, refusals, failures by kind, the error shapes and the keys changed. */
  byFunction(): string {
    const lines: string[] = [];
    for (const [fn, c] of [...this.perFunction].sort((a, b) => a[0].localeCompare(b[0]))) {
      const groups = this.sorted().filter((g) => g.fn === fn);
      const kinds = groups.map((g) => `${g.kind} ${g.count}`).join(', ') || 'no failures';
      lines.push(`${fn}: ${c.calls} calls, ${c.refused} refused; ${kinds}`);
      if (c.validRefused > 0) lines.push(`    unbroken calls refused: ${c.validRefused} of ${c.valid}, e.g. ${c.validError}`);
      for (const g of groups) {
        for (const [shape, n] of [...g.shapes].sort((a, b) => b[1] - a[1]).slice(0, 6)) lines.push(`    ${g.kind} x${n}: ${shape}`);
        const keys = [...g.keys].sort((a, b) => b[1] - a[1]).slice(0, 8);
        if (keys.length) lines.push(`    keys changed: ${keys.map(([k, n]) => `${k} (${n})`).join('; ')}`);
        const c0 = g.first.call;
        lines.push(`    e.g. (${c0.how}) ${showArgv(c0.argv)}${c0.mutation ? ` with ${c0.mutation.key} := ${c0.mutation.type}` : ''}`);
      }
    }
    return lines.join('\n');
  }
}
