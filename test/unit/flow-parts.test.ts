/**
 * How a flow across cluster slots is cut into parts (src/engine/flows/flow-journal.ts), read
 * without a server: one part per slot and level, a parent's part before its children's, the first
 * part holding the journal of the others, and children of existing parents registered by the
 * first part in the parent's slot.
 */
import { expect } from 'chai';
import { keySlot } from '../../src/engine/connecting/connection.js';
import { QueueKeys } from '../../src/engine/shared/keys.js';
import { partsOf } from '../../src/engine/flows/flow-journal.js';
import { childNode, encodeNodes, treeToNodes, type FlowNode } from '../../src/engine/flows/flow-nodes.js';

/** `count` queue names, each in a slot of its own. */
function queuesInSlots(count: number): string[] {
  const names: string[] = [];
  const slots = new Set<number>();
  for (let i = 0; names.length < count; i++) {
    const slot = keySlot(new QueueKeys(`pq-${i}`).meta);
    if (!slots.has(slot)) {
      slots.add(slot);
      names.push(`pq-${i}`);
    }
  }
  return names;
}

const NODE_WIDTH = 12;
const HEAD = 8;
/** The job ids a part's ARGV stores, in order. */
const idsOf = (args: (string | number)[]) => {
  const out: string[] = [];
  for (let i = HEAD; i < args.length; i += NODE_WIDTH) out.push(String(args[i + 1]));
  return out;
};

describe('a flow across cluster slots, cut into parts', () => {
  const [A, B, C] = queuesInSlots(3);
  const meta = (q: string) => new QueueKeys(q).meta;
  const job = (q: string, id: string) => new QueueKeys(q).job(id);

  it('a chain A -> B -> A is three parts, parents first; the first (in the top job\'s slot) carries the journal of the other two', () => {
    const nodes = treeToNodes({
      name: 'top', queueName: A, opts: { jobId: 't' },
      children: [{ name: 'mid', queueName: B, opts: { jobId: 'm' }, children: [{ name: 'leaf', queueName: A, opts: { jobId: 'l' } }] }],
    });
    const plan = partsOf(nodes, encodeNodes(nodes), 1000);
    expect(plan.flowId).to.equal(job(A, 't'));
    expect(plan.journalMeta).to.equal(meta(A));
    expect(plan.first.keys).to.deep.equal([meta(A)]);
    expect(idsOf(plan.first.args)).to.deep.equal(['t']);
    expect(plan.first.args.slice(0, 8)).to.deep.equal([1000, '', 0, 0, job(A, 't'), JSON.stringify({ parts: plan.rest }), '', 1]);
    expect(plan.rest.map((p) => p.keys)).to.deep.equal([[meta(B)], [meta(A)]]);
    expect(plan.rest.map((p) => idsOf(p.args))).to.deep.equal([['m'], ['l']]);
    for (const p of plan.rest) expect(p.args.slice(1, 7)).to.deep.equal(['', 0, 0, job(A, 't'), '', '']);
    // the leaf names its parent in another part: the link is kept whole, for the parent's part stored it
    expect(plan.rest[1].args[HEAD + 10]).to.equal(job(B, 'm'));
  });

  it('a DAG node is in the part after the latest of its parents\' parts; jobs of one slot and level share a part', () => {
    const n = (queueName: string, id: string, parents: string[], deps: string[]): FlowNode => ({ queueName, prefix: 'glide', id, name: id, data: {}, opts: {}, parents, deps });
    const nodes = [
      n(A, 'top', [], [job(B, 'x'), job(A, 'y')]),
      n(B, 'x', [job(A, 'top')], [job(A, 'z')]),
      n(A, 'y', [job(A, 'top')], [job(A, 'z')]),
      n(A, 'z', [job(B, 'x'), job(A, 'y')], []),
      n(C, 'w', [], []),
    ];
    const plan = partsOf(nodes, encodeNodes(nodes), 0);
    expect(idsOf(plan.first.args)).to.deep.equal(['top', 'y']);
    expect(plan.rest.map((p) => idsOf(p.args)).slice(-2)).to.deep.equal([['x'], ['z']]);
    expect(plan.rest.map((p) => idsOf(p.args))).to.deep.include(['w']);
  });

  it('a node list that starts with a child (a DAG\'s may): the first part is its top\'s, and keeps the journal', () => {
    const n = (queueName: string, id: string, parents: string[], deps: string[]): FlowNode => ({ queueName, prefix: 'glide', id, name: id, data: {}, opts: {}, parents, deps });
    const nodes = [n(A, 'leaf', [job(B, 'top')], []), n(B, 'top', [], [job(A, 'leaf')])];
    const plan = partsOf(nodes, encodeNodes(nodes), 0);
    expect(plan.journalMeta).to.equal(meta(B));
    expect(plan.first.keys).to.deep.equal([meta(B)]);
    expect(idsOf(plan.first.args)).to.deep.equal(['top']);
    expect(plan.rest.map((p) => idsOf(p.args))).to.deep.equal([['leaf']]);
  });

  it('a child of an existing job in another slot: the first part, in the parent\'s slot, only registers the link; the child follows', () => {
    const child = childNode(B, 'glide', 'kid', {}, { jobId: 'k', parent: { id: 'p', queue: new QueueKeys(A).base } });
    const plan = partsOf([child], encodeNodes([child]), 0);
    expect(plan.journalMeta).to.equal(meta(A));
    expect(plan.first.keys).to.deep.equal([meta(A)]);
    expect(idsOf(plan.first.args)).to.deep.equal([]);
    expect(plan.first.args[6]).to.equal(`${job(A, 'p')} ${job(B, 'k')}`);
    expect(plan.rest.map((p) => idsOf(p.args))).to.deep.equal([['k']]);
  });

  it('existing parents in two slots are refused by name before anything is sent', () => {
    const n: FlowNode = { queueName: C, prefix: 'glide', id: 'k', name: 'k', data: {}, opts: {}, parents: [job(A, 'p1'), job(B, 'p2')], deps: [] };
    expect(() => partsOf([n], encodeNodes([n]), 0)).to.throw(/existing parents a flow names must all be in one hash slot/);
  });
});
