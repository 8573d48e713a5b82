/**
 * How a flow's nodes are encoded for glidemq_addFlow (src/engine/flows/flow-nodes.ts encodeNodes),
 * read without a server: siblings sharing one options object have those options encoded once, and
 * still each node's name, data and id are checked, a bad one refused naming its node.
 */
import { expect } from 'chai';
import { encodeNodes, newFlowJobId, nodeKey, treeToNodes } from '../../src/engine/flows/flow-nodes.js';
import { encodeJob, type JobOptions } from '../../src/engine/producing/options.js';

const shared: JobOptions = { removeOnComplete: true, attempts: 3, backoff: { type: 'exponential', delay: 10 }, sizeLimit: 64 };

function tree(childData: unknown[]) {
  return {
    name: 'parent',
    queueName: 'enc-parents',
    data: { top: true },
    opts: shared,
    children: childData.map((data, i) => ({ name: `child-${i}`, queueName: 'enc-children', data, opts: shared })),
  };
}

function refusal(f: () => unknown): Error {
  try {
    f();
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a refusal');
}

describe('flow encoding', () => {
  it('encodes each node of shared options as encodeJob encodes it alone', () => {
    const nodes = treeToNodes(tree([{ i: 0 }, { i: 1 }, undefined]));
    const enc = encodeNodes(nodes);
    nodes.forEach((n, i) => expect(enc.shapes[i]).to.deep.equal(encodeJob(n.name, n.data, { ...shared, jobId: n.id })));
    // each node has its own group: no array is shared between nodes
    expect(new Set(enc.shapes).size).to.equal(nodes.length);
  });

  it('refuses a later sibling of shared options by its own data, naming it', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const nodes = treeToNodes(tree([{ i: 0 }, cyclic]));
    const err = refusal(() => encodeNodes(nodes));
    expect(err.message).to.equal(`flow: job child-1 (${nodes[2].id}) of queue enc-children: ${refusal(() => encodeJob('x', cyclic)).message}`);
  });

  it("refuses a later sibling's data over the shared sizeLimit, naming it", () => {
    const nodes = treeToNodes(tree([{ i: 0 }, { big: 'x'.repeat(100) }]));
    const err = refusal(() => encodeNodes(nodes));
    expect(err.name).to.equal('PayloadTooLargeError');
    expect(err.message).to.match(new RegExp(`^flow: job child-1 \\(${nodes[2].id}\\) of queue enc-children: job "child-1": data is \\d+ bytes of JSON, over its sizeLimit of 64 bytes`));
  });

  it("refuses a later sibling's bad job id, naming it", () => {
    const nodes = treeToNodes(tree([{ i: 0 }, { i: 1 }]));
    // (its parent's link renamed too: the links are checked before the nodes are encoded)
    nodes[2].id = 'bad:id';
    nodes[0].deps[1] = nodeKey(nodes[2]);
    const err = refusal(() => encodeNodes(nodes));
    expect(err.message).to.match(/^flow: job child-1 \(bad:id\) of queue enc-children: job id "bad:id" is invalid/);
  });

  it('a node without a jobId gets 22 base64url characters, never a whole number nor a leading dash, each its own', () => {
    const ids = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const id = newFlowJobId();
      expect(id).to.match(/^[A-Za-z0-9_][A-Za-z0-9_-]{21}$/);
      expect(id).to.not.match(/^\d+$/);
      ids.add(id);
    }
    expect(ids.size).to.equal(2000);
    const nodes = treeToNodes(tree([1]));
    for (const n of nodes) expect(n.id).to.have.length(22);
  });
});
