/**
 * No import circle in src/ (issue 28). A circle means no file of it can be read, tested or moved
 * without the others, and it lets a lower room quietly depend on a higher one; once gone it must
 * stay gone, so this test reads every import (type-only ones too: they tie the design together as
 * much as the runtime ones) with TypeScript's own import scanner and fails on any strongly
 * connected group of files, naming the files and one path round the circle.
 *
 * KNOWN_CIRCLES lists circles not yet broken; issue 28 emptied it, and it stays empty.
 *
 * The engine's rooms (src/engine/<room>/, src/README.md) are in levels, and a room imports only
 * rooms of a lower level (LEVELS): that keeps the house a stack, so a newcomer knows what a file may
 * touch, and a circle between rooms cannot start.
 */
import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';
import { REPO_ROOT } from '../helpers/fixtures.js';

const SRC = join(REPO_ROOT, 'src');

/** Circles left to break (files relative to src/, sorted): none since issue 28. */
const KNOWN_CIRCLES: string[][] = [];

/** Each engine room's level (src/README.md); a room may import only rooms of a lower level. */
const LEVELS: Record<string, number> = {
  shared: 0,
  connecting: 1,
  producing: 2,
  scheduling: 3,
  inspecting: 3,
  jobs: 4,
  administering: 4,
  consuming: 5,
  broadcast: 5,
  flows: 5,
  queue: 6,
  operating: 7,
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** Each file's imports of other files in src/ (relative specifiers; `.js` names the `.ts` source). */
function importGraph(files: string[]): Map<string, string[]> {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    const targets = importedFiles
      .map((f) => f.fileName)
      .filter((name) => name.startsWith('.'))
      .map((name) => resolve(dirname(file), name.replace(/\.js$/, '.ts')))
      .map((path) => (known.has(path) ? path : join(path, 'index.ts')))
      .filter((path) => known.has(path));
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** Tarjan's strongly connected components with more than one file, or a file importing itself. */
function circles(graph: Map<string, string[]>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || graph.get(v)!.includes(v)) found.push(component);
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

/** One way round a circle, for the failure message: a -> b -> ... -> a. */
function pathRound(graph: Map<string, string[]>, members: Set<string>, start: string): string[] {
  const seen = new Map<string, string>();
  const queue = [start];
  while (queue.length) {
    const v = queue.shift()!;
    for (const w of graph.get(v) ?? []) {
      if (!members.has(w)) continue;
      if (w === start) {
        const path = [start];
        for (let at = v; at !== start; at = seen.get(at)!) path.splice(1, 0, at);
        return [...path, start];
      }
      if (!seen.has(w)) {
        seen.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start];
}

describe('src/ has no import circle', () => {
  it('every strongly connected group of files is a known circle (issue 28), and those only shrink', () => {
    const graph = importGraph(sourceFiles(SRC));
    expect(graph.size, 'source files found under src/').to.be.greaterThan(50);
    const name = (p: string) => relative(SRC, p);
    const known = new Set(KNOWN_CIRCLES.flat());
    const problems: string[] = [];
    for (const component of circles(graph)) {
      const files = component.map(name).sort();
      if (files.every((f) => known.has(f))) continue;
      const round = pathRound(graph, new Set(component), component[0]!).map(name);
      problems.push(`${files.length} files import each other in a circle: ${round.join(' -> ')}`);
    }
    expect(problems, problems.join('\n')).to.deep.equal([]);
  });

  it('an engine room imports only rooms of a lower level, and every engine file is in a room', () => {
    const graph = importGraph(sourceFiles(SRC));
    const engine = join(SRC, 'engine');
    const roomOf = (p: string) => relative(engine, p).split(sep);
    const problems: string[] = [];
    for (const [file, targets] of graph) {
      if (!file.startsWith(engine + sep)) continue;
      const [room, ...rest] = roomOf(file);
      if (rest.length === 0 || !(room in LEVELS)) {
        problems.push(`${relative(SRC, file)} is in no room of LEVELS`);
        continue;
      }
      for (const t of targets) {
        if (!t.startsWith(engine + sep)) continue;
        const [to] = roomOf(t);
        if (to !== room && !(LEVELS[to]! < LEVELS[room]!)) {
          problems.push(`${relative(SRC, file)} (${room}, level ${LEVELS[room]}) imports ${relative(SRC, t)} (${to}, level ${LEVELS[to]})`);
        }
      }
    }
    expect(problems, problems.join('\n')).to.deep.equal([]);
  });
});
