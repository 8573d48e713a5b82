/**
 * The key templates src/engine/shared/keys.ts builds for a sample queue or broadcast (its getters and
 * one-argument methods), and their diff with the templates the Lua builds (./keys.ts), written
 * in the same notation: <base> or <bcast> for the family's base, `*` for an id.
 */

/** Templates of every key a keys.ts class builds: its getters, and its one-argument methods. */
export function tsKeys(sample: object, base: string, marker: string): Set<string> {
  const out = new Set<string>();
  const ARG = 'sampleArgument';
  const proto = Object.getPrototypeOf(sample) as object;
  for (const name of Object.getOwnPropertyNames(proto)) {
    const d = Object.getOwnPropertyDescriptor(proto, name)!;
    let value: unknown;
    if (d.get) value = d.get.call(sample);
    else if (name !== 'constructor' && typeof d.value === 'function' && d.value.length === 1) value = d.value.call(sample, ARG);
    // A value with '*' is a SCAN pattern (jobPattern), not a key.
    if (typeof value !== 'string' || value.includes('*') || !value.startsWith(base)) continue;
    out.add(marker + value.slice(base.length).replaceAll(ARG, '*'));
  }
  return out;
}

const isPrefix = (t: string) => t.endsWith(':') || t.endsWith('{');
/** A TS template as a pattern: `*` is one id (ids, group ids and subscriptions hold no ':'). */
const templateRe = (t: string) => new RegExp('^' + t.split('*').map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[^:]+') + '$');

/** Lua templates keys.ts cannot build, and keys.ts templates the Lua never builds. */
export function diffKeys(lua: Set<string>, ts: Set<string>): { luaOnly: string[]; tsOnly: string[] } {
  const tsList = [...ts];
  const luaList = [...lua];
  const luaMatched = (l: string) =>
    isPrefix(l) ? tsList.some((t) => t.startsWith(l)) : tsList.some((t) => !isPrefix(t) && templateRe(t).test(l));
  const tsMatched = (t: string) =>
    isPrefix(t) ? luaList.some((l) => l.startsWith(t)) : luaList.some((l) => !isPrefix(l) && templateRe(t).test(l));
  return { luaOnly: luaList.filter((l) => !luaMatched(l)).sort(), tsOnly: tsList.filter((t) => !tsMatched(t)).sort() };
}

export function keyDiffMessage(what: string, lua: Set<string>, ts: Set<string>, d: { luaOnly: string[]; tsOnly: string[] }): string {
  return [
    `${what}: the Lua and src/engine/shared/keys.ts disagree.`,
    `  built by the Lua, not by keys.ts: ${d.luaOnly.join(', ') || '-'}`,
    `  built by keys.ts, not by the Lua: ${d.tsOnly.join(', ') || '-'}`,
    `  Lua:     ${[...lua].sort().join(', ')}`,
    `  keys.ts: ${[...ts].sort().join(', ')}`,
  ].join('\n');
}
