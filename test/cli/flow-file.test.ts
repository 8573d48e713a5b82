/**
 * The flow file of `glidemq enqueue <queue> --flow <file.json>` (src/cli/flow-file.ts), read and
 * checked whole before anything is written: a BullMQ tree or a glide-mq DAG, each refusal one line
 * naming where in the file it is.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkFlow, findCycle, readFlowFile } from '../../src/cli/flow-file.js';
import { InvalidArgumentError } from '../../src/engine/shared/errors.js';

/** The one-line message checkFlow refuses `doc` with. */
function refusal(doc: unknown): string {
  try {
    checkFlow(doc, 'q', 'f.json');
  } catch (err) {
    expect(err).to.be.instanceOf(InvalidArgumentError);
    const message = (err as Error).message;
    expect(message).to.not.include('\n');
    return message;
  }
  throw new Error(`accepted: ${JSON.stringify(doc)}`);
}

describe('CLI: flow files (enqueue --flow)', () => {
  it('a tree: queueName defaults to the queue named, data to {}, children kept in order', () => {
    const f = checkFlow(
      {
        name: 'report',
        data: { month: 11 },
        children: [
          { name: 'fetch', queueName: 'sources', data: 'sales', opts: { attempts: 3, failParentOnFailure: true } },
          { name: 'fetch', children: [{ name: 'deep', opts: { jobId: 'deep-1', delay: '5s' } }] },
        ],
      },
      'reports',
    );
    expect(f).to.deep.equal({
      kind: 'tree',
      jobs: 4,
      tree: {
        name: 'report',
        queueName: 'reports',
        data: { month: 11 },
        children: [
          { name: 'fetch', queueName: 'sources', data: 'sales', opts: { attempts: 3, failParentOnFailure: true } },
          { name: 'fetch', queueName: 'reports', data: {}, children: [{ name: 'deep', queueName: 'reports', data: {}, opts: { jobId: 'deep-1', delay: '5s' } }] },
        ],
      },
    });
  });

  it('a DAG: nodes with deps by name; a node may have several parents', () => {
    const f = checkFlow(
      {
        nodes: [
          { name: 'a', data: 1 },
          { name: 'b', deps: ['a'] },
          { name: 'c', queueName: 'other', deps: ['a'] },
          { name: 'd', deps: ['b', 'c'], opts: { priority: 2 } },
        ],
      },
      'q',
    );
    expect(f.kind).to.equal('dag');
    expect(f.jobs).to.equal(4);
    expect(f.kind === 'dag' && f.nodes).to.deep.equal([
      { name: 'a', queueName: 'q', data: 1 },
      { name: 'b', queueName: 'q', data: {}, deps: ['a'] },
      { name: 'c', queueName: 'other', data: {}, deps: ['a'] },
      { name: 'd', queueName: 'q', data: {}, opts: { priority: 2 }, deps: ['b', 'c'] },
    ]);
  });

  it('refuses what is not a flow, naming where in the file', () => {
    const cases: [unknown, RegExp][] = [
      [[{ name: 'a' }], /^f\.json: a flow is an object: a tree .* or a DAG .*, got a list$/],
      [{ name: 'a', children: [{ name: 'b', nmae: 'x' }] }, /^f\.json: children\[0\]: unknown field "nmae"/],
      [{ name: 'a', children: [{ data: {} }] }, /^f\.json: children\[0\]: "name" is missing/],
      [{ name: '' }, /^f\.json: the top job: "name" is missing/],
      [{ name: 'a', children: {} }, /^f\.json: the top job\.children: a list of jobs, got an object$/],
      [{ name: 'a', children: [{ name: 'b', children: [7] }] }, /^f\.json: children\[0\]\.children\[0\]: a job is an object/],
      [{ name: 'a', queueName: 'bad:queue' }, /^f\.json: the top job: invalid queueName "bad:queue"/],
      [{ name: 'a', opts: { priority: 0.5 } }, /^f\.json: the top job: priority must be a whole number/],
      [{ name: 'a', opts: { priority: 2, lifo: true } }, /^f\.json: the top job: a job cannot be both prioritized and LIFO$/],
      [{ name: 'a', opts: { jobId: '12' } }, /custom ids cannot be whole numbers/],
      [{ name: 'a', opts: { atempts: 3 } }, /^f\.json: the top job\.opts: unknown option "atempts" \(a flow job takes jobId, delay/],
      [{ name: 'a', opts: { deduplication: { id: 'x' } } }, /^f\.json: the top job\.opts\.deduplication: not taken in a flow/],
      [{ name: 'a', opts: { parent: { id: '1', queue: 'glide:q' } } }, /opts\.parent: not taken in a flow/],
      [{ name: 'a', opts: { failParentOnFailure: true } }, /^f\.json: the top job\.opts\.failParentOnFailure: a failure policy .* this job is no child$/],
      [{ name: 'a', children: [{ name: 'b', opts: { failParentOnFailure: 'yes' } }] }, /children\[0\]\.opts\.failParentOnFailure: true or false, got the text "yes"/],
      [{ name: 'a', children: [{ name: 'b', opts: { failParentOnFailure: true, ignoreDependencyOnFailure: true } }] }, /both say what a failure does: give one/],
      [{ name: 'a', children: [{ name: 'b', opts: { jobId: 'x' } }, { name: 'c', opts: { jobId: 'x' } }] }, /^f\.json: children\[1\]\.opts\.jobId: "x" is the id of another job of this flow in queue q$/],
      [{ nodes: [] }, /^f\.json: nodes: no nodes/],
      [{ nodes: {} }, /^f\.json: nodes: a list of nodes/],
      [{ nodes: [{ name: 'a' }], name: 'x' }, /^f\.json: a DAG is \{"nodes": \[\.\.\.\]\} only; unknown field "name"/],
      [{ nodes: [{ name: 'a' }, { data: 1 }] }, /^f\.json: nodes\[1\]: a node needs a "name"/],
      [{ nodes: [{ name: 'a' }, { name: 'a' }] }, /^f\.json: nodes\[1\] "a": the name is taken by nodes\[0\]/],
      [{ nodes: [{ name: 'a', deps: ['zz'] }] }, /^f\.json: nodes\[0\] "a"\.deps\[0\]: no node is named "zz"$/],
      [{ nodes: [{ name: 'a', deps: 'b' }, { name: 'b' }] }, /^f\.json: nodes\[0\] "a"\.deps: a list of node names/],
      [{ nodes: [{ name: 'a', deps: ['a'] }] }, /a node cannot depend on itself/],
      [{ nodes: [{ name: 'a', deps: ['b', 'b'] }, { name: 'b' }] }, /"b" is named twice/],
      [{ nodes: [{ name: 'a', deps: ['c'] }, { name: 'b', deps: ['a'] }, { name: 'c', deps: ['b'] }] }, /^f\.json: nodes: the deps form a cycle: a -> c -> b -> a/],
      [{ nodes: [{ name: 'a', children: [] }] }, /^f\.json: nodes\[0\] "a": unknown field "children"/],
      [{ nodes: [{ name: 'top', opts: { removeDependencyOnFailure: true } }] }, /nodes\[0\] "top"\.opts\.removeDependencyOnFailure: a failure policy/],
    ];
    for (const [doc, message] of cases) expect(refusal(doc), JSON.stringify(doc)).to.match(message);
  });

  it('findCycle: none in a diamond, one through a long chain without overflowing the stack', () => {
    expect(findCycle(['a', 'b', 'c', 'd'], [['b', 'c'], ['d'], ['d'], []])).to.equal(undefined);
    const n = 20_000;
    const names = Array.from({ length: n }, (_, i) => `n${i}`);
    const deps = names.map((_, i) => [names[(i + 1) % n]]);
    const cycle = findCycle(names, deps)!;
    expect(cycle).to.have.length(n + 1);
    expect(cycle[0]).to.equal(cycle[n]);
  });

  describe('reading the file', () => {
    let dir: string;
    before(() => (dir = mkdtempSync(join(tmpdir(), 'glidemq-flow-file-'))));
    after(() => rmSync(dir, { recursive: true, force: true }));

    it('refuses a file it cannot read, text that is not UTF-8 or not JSON, in one line naming the file', () => {
      const at = (name: string, content: string | Buffer) => {
        const p = join(dir, name);
        writeFileSync(p, content);
        return p;
      };
      const cases: [string, RegExp][] = [
        [join(dir, 'missing.json'), /^--flow: cannot read .*missing\.json: no such file$/],
        [dir, /^--flow: cannot read .*: it is a directory$/],
        [at('latin1.json', Buffer.from([0x7b, 0xe9, 0x7d])), /latin1\.json: not valid UTF-8 text$/],
        [at('broken.json', '{"name": "a",'), /broken\.json: not valid JSON \(/],
      ];
      for (const [file, message] of cases) expect(() => readFlowFile(file, 'q'), file).to.throw(InvalidArgumentError, message);
      expect(readFlowFile(at('ok.json', '{"name":"a","children":[{"name":"b"}]}'), 'q')).to.deep.include({ kind: 'tree', jobs: 2 });
    });
  });
});
