/**
 * The CLI of flows (issue 29): `enqueue --flow <file>`, `flow <queue> <id>`, a flow's links in
 * `job`, `jobs --state waiting-children`, and `check stuck` on a flow that is only waiting.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import type { Queue } from '../../src/engine/queue/queue.js';
import { useCliSuite } from '../helpers/cli-suite.js';
import { uniqueQueue } from '../helpers/engine.js';
import { keyspaceFingerprint } from '../helpers/keyspace.js';
import { waitFor } from '../helpers/valkey.js';
import { inParallel } from '../helpers/parallel.js';

/** Every line of `text` fits `width` columns. */
function expectFits(text: string, width: number): void {
  for (const line of text.split('\n')) expect(Array.from(line).length, `line wider than ${width}: ${line}`).to.be.at.most(width);
}

interface AddedJson {
  id: string;
  queue: string;
  name: string;
  children: AddedJson[];
}

describe('CLI: flows (enqueue --flow, flow, job, jobs --state waiting-children)', function () {
  this.timeout(60000);
  let name: string;
  let q: Queue;
  let dir: string;
  const { cli, harness: h } = useCliSuite('flw', (made) => ({ q, name } = made));
  before(() => (dir = mkdtempSync(join(tmpdir(), 'glidemq-flows-cli-'))));
  after(() => rmSync(dir, { recursive: true, force: true }));

  /** Writes `doc` (JSON, or text as it is) to a file of the test's directory and returns its path. */
  function flowFile(doc: unknown, file = `${uniqueQueue('flow')}.json`): string {
    const path = join(dir, file);
    writeFileSync(path, typeof doc === 'string' ? doc : JSON.stringify(doc));
    return path;
  }

  /** A report in `name` with two fetch children in `sources`, one of them with a child of its own; --json's answer. */
  async function addReport(sources: string): Promise<AddedJson> {
    const file = flowFile({
      name: 'report',
      opts: { jobId: 'report-1' },
      children: [
        { name: 'fetch', queueName: sources, data: 'sales', opts: { jobId: 'sales' } },
        { name: 'fetch', queueName: sources, data: 'costs', opts: { jobId: 'costs', failParentOnFailure: true }, children: [{ name: 'download', queueName: sources, opts: { jobId: 'dl' } }] },
      ],
    });
    const r = await cli(['--json', 'enqueue', name, '--flow', file]);
    expect(r.code, r.stderr).to.equal(0);
    return JSON.parse(r.stdout) as AddedJson;
  }

  it('enqueue --flow adds a tree whole: the ids by node (--json nested as the file), the parents waiting for their children', async () => {
    const sources = uniqueQueue('src');
    const s = h.queue(sources);
    const added = await addReport(sources);
    expect(added).to.deep.equal({
      id: 'report-1',
      queue: name,
      name: 'report',
      created: true,
      children: [
        { id: 'sales', queue: sources, name: 'fetch', children: [] },
        { id: 'costs', queue: sources, name: 'fetch', children: [{ id: 'dl', queue: sources, name: 'download', children: [] }] },
      ],
    });
    expect(await q.getJobState('report-1')).to.equal('waiting-children');
    expect(await s.getJobState('costs')).to.equal('waiting-children');
    expect(await s.getJobState('sales')).to.equal('waiting');
    expect((await s.getJob('costs'))!.opts).to.include({ failParentOnFailure: true });
    // text: one line per job, the id first, indented as in the file
    const file = flowFile({ name: 'top', children: [{ name: 'leaf', queueName: sources }] });
    const r = await cli(['enqueue', name, '--flow', file]);
    expect(r.code, r.stderr).to.equal(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines).to.have.length(2);
    expect(lines[0]).to.match(new RegExp(`^[\\w-]{22}  top  @${name}$`));
    expect(lines[1]).to.match(new RegExp(`^└─ [\\w-]{22}  leaf  @${sources}$`));
    expect(await q.getJobState(lines[0].split(' ')[0])).to.equal('waiting-children');
    // --flow - reads the flow from stdin; a bad one names stdin
    const piped = await cli(['--json', 'enqueue', name, '--flow', '-'], { input: JSON.stringify({ name: 'piped', opts: { jobId: 'piped-1' }, children: [{ name: 'c' }] }) });
    expect(piped.code, piped.stderr).to.equal(0);
    expect(JSON.parse(piped.stdout)).to.deep.include({ id: 'piped-1', name: 'piped', created: true });
    // the same flow again: its ids name existing jobs, so nothing is added, and the command says so
    const again = await cli(['enqueue', name, '--flow', '-'], { input: JSON.stringify({ name: 'piped', opts: { jobId: 'piped-2' }, children: [{ name: 'c', opts: { jobId: 'piped-c' } }] }) });
    expect(again.code, again.stderr).to.equal(0);
    const twice = await cli(['enqueue', name, '--flow', '-'], { input: JSON.stringify({ name: 'piped', opts: { jobId: 'piped-2' }, children: [{ name: 'c', opts: { jobId: 'piped-c' } }] }) });
    expect(twice.stderr).to.match(/already existed .*nothing added/);
    const bad = await cli(['enqueue', name, '--flow', '-'], { input: '{"name": "x", "kids": []}' });
    expect(bad.code).to.equal(2);
    expect(bad.stderr.trim()).to.equal('glidemq: stdin: the top job: unknown field "kids" (a job has "name", "queueName", "data", "opts", "children")');
  });

  it('enqueue --flow adds a DAG: each node after its deps, a node shared by two; the ids by node name', async () => {
    const other = uniqueQueue('src');
    const file = flowFile({
      nodes: [
        { name: 'extract', opts: { jobId: 'x1' } },
        { name: 'clean', deps: ['extract'] },
        { name: 'enrich', queueName: other, deps: ['extract'], opts: { jobId: 'e1' } },
        { name: 'load', deps: ['clean', 'enrich'], opts: { jobId: 'load-1' } },
      ],
    });
    const r = await cli(['--json', 'enqueue', name, '--flow', file]);
    expect(r.code, r.stderr).to.equal(0);
    const { nodes } = JSON.parse(r.stdout) as { nodes: Record<string, { id: string; queue: string }> };
    expect(Object.keys(nodes)).to.deep.equal(['extract', 'clean', 'enrich', 'load']);
    expect(nodes.extract).to.deep.equal({ id: 'x1', queue: name });
    expect(nodes.load).to.deep.equal({ id: 'load-1', queue: name });
    expect(nodes.enrich.queue).to.equal(other);
    expect(await q.getJobState('x1')).to.equal('waiting');
    expect(await q.getJobState(nodes.clean.id)).to.equal('waiting-children');
    expect(await h.queue(other).getJobState(nodes.enrich.id)).to.equal('waiting-children');
    expect(await q.getJobState('load-1')).to.equal('waiting-children');
    // the flow from load down: extract under both of its parents
    const tree = await cli(['flow', name, 'load-1']);
    expect(tree.code, tree.stderr).to.equal(0);
    const treeLines = tree.stdout.trim().split('\n');
    // an 80-column line keeps the state and counts and cuts the end of a long id
    expect(`${nodes.clean.id}`.startsWith(treeLines[1].replace(/^├─ clean  waiting-children \(1 unprocessed\)  #/, '').replace(/…$/, ''))).to.equal(true);
    expect(treeLines.filter((_, i) => i !== 1)).to.deep.equal([
      'load  waiting-children (2 unprocessed)  #load-1',
      '│  └─ extract  waiting  #x1',
      `└─ enrich @${other}  waiting-children (1 unprocessed)  #${nodes.enrich.id}`,
      `   └─ extract @${name}  waiting  #x1`,
    ]);
    // text: one line per node, "<id>  <name>", the queue when it is not the one named
    const text = await cli(['enqueue', name, '--flow', flowFile({ nodes: [{ name: 'a' }, { name: 'b', queueName: other, deps: ['a'] }] })]);
    expect(text.code, text.stderr).to.equal(0);
    const lines = text.stdout.trim().split('\n');
    expect(lines[0]).to.match(/^[\w-]{22}  a$/);
    expect(lines[1]).to.match(new RegExp(`^[\\w-]{22}  b  @${other}$`));
  });

  it('a bad flow file exits 2 with one line naming the place, and writes nothing', async () => {
    await q.add('plain', {}); // the queue exists, so the fingerprint covers it
    const before = await keyspaceFingerprint(q.client as Redis);
    const cases: [string[], RegExp][] = [
      [['--flow', flowFile({ name: 'a', children: [{ name: 'b', nmae: 'typo' }] })], /: children\[0\]: unknown field "nmae"/],
      [['--flow', flowFile({ children: [] })], /: the top job: "name" is missing/],
      [['--flow', flowFile({ name: 'a', children: [{ name: 'b', opts: { priority: -1 } }] })], /children\[0\]: priority must be a whole number/],
      [['--flow', flowFile({ name: 'a', children: [{ name: 'b', opts: { jobId: 'x' } }, { name: 'c', opts: { jobId: 'x' } }] })], /"x" is the id of another job of this flow/],
      [['--flow', flowFile({ name: 'a', children: [{ name: 'b', queueName: 'no:colons' }] })], /children\[0\]: invalid queueName/],
      [['--flow', flowFile('{"name": "a", ')], /not valid JSON/],
      [['--flow', join(dir, 'nowhere.json')], /--flow: cannot read .*nowhere\.json: no such file/],
      [['--flow', flowFile({ nodes: [{ name: 'a', deps: ['b'] }, { name: 'b', deps: ['a'] }] })], /nodes: the deps form a cycle: a -> b -> a/],
      [['--flow', flowFile({ nodes: [{ name: 'a', deps: ['zz'] }] })], /nodes\[0\] "a"\.deps\[0\]: no node is named "zz"/],
      [['--flow', flowFile({ nodes: [{ name: 'a', opts: { jobId: 'same' } }, { name: 'b', opts: { jobId: 'same' } }] })], /nodes\[1\] "b"\.opts\.jobId: "same" is the id of another job/],
      [['{}', '--flow', flowFile({ name: 'a' })], /give either data or --flow, not both/],
      [['--flow', flowFile({ name: 'a' }), '--priority', '2'], /--priority is for one job: with --flow, each job of the file has its own/],
      [['--flow', flowFile({ name: 'a' }), '--job-id', 'j'], /--job-id is for one job/],
      [['--flow', flowFile({ name: 'a' }), '-n', 'x'], /--name is for one job/],
      [['--flow', flowFile({ name: 'a' }), '--ndjson'], /give either --ndjson or --flow, not both/],
    ];
    await inParallel(cases, async ([args, message]) => {
      const r = await cli(['enqueue', name, ...args]);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(2);
      expect(r.stderr, args.join(' ')).to.match(message);
      expect(r.stderr.trim().split('\n'), args.join(' ')).to.have.length(1);
      expect(r.stdout, args.join(' ')).to.equal('');
    });
    expect(await keyspaceFingerprint(q.client as Redis), 'nothing written').to.equal(before);
  });

  it("flow prints the tree with each job's state and its children by how they settled; it follows the flow as children finish", async () => {
    const sources = uniqueQueue('src');
    await addReport(sources);
    const r = await cli(['flow', name, 'report-1']);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout.trim().split('\n')).to.deep.equal([
      `report  waiting-children (2 unprocessed)  #report-1`,
      `├─ fetch @${sources}  waiting-children (1 unprocessed)  #costs`,
      `│  └─ download  waiting  #dl`,
      `└─ fetch @${sources}  waiting  #sales`,
    ]);
    // the download and the sales fetch complete: costs runs, report still waits for it
    const w = h.worker(sources, async (job) => (job.id === 'costs' ? new Promise(() => undefined) : `${job.id} done`));
    await waitFor(async () => (await h.queue(sources).getJobState('costs')) === 'active', 'costs running');
    const later = await cli(['flow', name, 'report-1']);
    expect(later.stdout.trim().split('\n')).to.deep.equal([
      `report  waiting-children (1 processed, 1 unprocessed)  #report-1`,
      `├─ fetch @${sources}  active (1 processed)  #costs`,
      `│  └─ download  completed  #dl`,
      `└─ fetch @${sources}  completed  #sales`,
    ]);
    await w.close(true).catch(() => undefined);
  });

  it('flow: a child failed under failParentOnFailure fails its parent; each failed job ends with its reason', async () => {
    const file = flowFile({ name: 'report', opts: { jobId: 'r2' }, children: [{ name: 'fetch', opts: { jobId: 'bad', failParentOnFailure: true } }] });
    expect((await cli(['enqueue', name, '--flow', file])).code).to.equal(0);
    const w = h.worker(name, async () => {
      throw new Error('no such table');
    });
    await waitFor(async () => (await q.getJobState('r2')) === 'failed', 'the parent failed');
    await w.close();
    const r = await cli(['flow', name, 'r2']);
    expect(r.code, r.stderr).to.equal(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).to.match(/^report  failed \(1 failed\): \S.*  #r2$/);
    expect(lines[1]).to.equal('└─ fetch  failed: no such table  #bad');
    const json = JSON.parse((await cli(['--json', 'flow', name, 'r2'])).stdout);
    expect(json.dependencies).to.deep.equal({ processed: 0, unprocessed: 0, ignored: 0, failed: 1 });
    expect(json.children[0]).to.deep.include({ id: 'bad', state: 'failed', failedReason: 'no such table' });
  });

  it('flow --json: the tree as nested objects with every count; --depth and --max-children say what they left out', async () => {
    const sources = uniqueQueue('src');
    await addReport(sources);
    const r = await cli(['--json', 'flow', name, 'report-1']);
    expect(r.code, r.stderr).to.equal(0);
    const top = JSON.parse(r.stdout);
    expect(Object.keys(top)).to.deep.equal(['id', 'queue', 'name', 'state', 'attemptsMade', 'timestamp', 'processedOn', 'finishedOn', 'failedReason', 'dependencies', 'children', 'childrenNotShown', 'parent']);
    expect(top).to.deep.include({ id: 'report-1', queue: name, name: 'report', state: 'waiting-children', attemptsMade: 0, childrenNotShown: 0, parent: null });
    expect(top.dependencies).to.deep.equal({ processed: 0, unprocessed: 2, ignored: 0, failed: 0 });
    expect(top.children.map((c: { id: string }) => c.id)).to.deep.equal(['costs', 'sales']);
    expect(top.children[0].children[0]).to.deep.include({ id: 'dl', queue: sources, state: 'waiting', children: [], childrenNotShown: 0 });
    expect(top.children[0].children[0].dependencies).to.deep.equal({ processed: 0, unprocessed: 0, ignored: 0, failed: 0 });

    const shallow = await cli(['flow', name, 'report-1', '--depth', '0']);
    expect(shallow.stdout.trim().split('\n')).to.deep.equal([`report  waiting-children (2 unprocessed)  #report-1`, '└─ … 2 children below --depth 0']);
    const oneChild = await cli(['flow', name, 'report-1', '--max-children', '1', '--depth', '1']);
    const lines = oneChild.stdout.trim().split('\n');
    expect(lines).to.have.length(3);
    expect(lines[2]).to.equal('└─ … 1 more child over --max-children 1');
    const json = JSON.parse((await cli(['--json', 'flow', name, 'report-1', '--depth', '1'])).stdout);
    expect(json.children[0]).to.deep.include({ id: 'costs', children: [], childrenNotShown: 1 });
  });

  it("flow of a child names its parent; the tree fits 80 columns with long names and ids", async () => {
    const sources = uniqueQueue('src');
    await addReport(sources);
    const child = await cli(['flow', sources, 'costs']);
    expect(child.code, child.stderr).to.equal(0);
    expect(child.stdout.replace(/\n/g, ' ')).to.include(`a child of job report-1 in queue ${name}: glidemq flow ${name} report-1 shows its flow`);
    expectFits(child.stdout, 80);
    const json = JSON.parse((await cli(['--json', 'flow', sources, 'costs'])).stdout);
    expect(json.parent).to.deep.equal({ id: 'report-1', queue: name });

    const long = 'n'.repeat(70);
    const file = flowFile({ name: long, children: [{ name: long, children: [{ name: long, queueName: sources }] }] });
    const id = JSON.parse((await cli(['--json', 'enqueue', name, '--flow', file])).stdout).id;
    const wide = await cli(['flow', name, id]);
    expect(wide.code, wide.stderr).to.equal(0);
    expect(wide.stdout.trim().split('\n')).to.have.length(3);
    expectFits(wide.stdout, 80);
    expect(wide.stdout).to.include('…');
  });

  it('flow: a job that does not exist exits 1 saying so on stderr; bad flags exit 2', async () => {
    await q.add('plain', {});
    const r = await cli(['flow', name, 'nope']);
    expect(r.code).to.equal(1);
    expect(r.stdout).to.equal('');
    expect(r.stderr.trim()).to.match(new RegExp(`^glidemq: job nope not found in queue ${name}`));
    for (const [args, message] of [
      [['flow', name, '1', '--depth', 'x'], /--depth must be a whole number from 0 to 100/],
      [['flow', name, '1', '--max-children', '0'], /--max-children must be a whole number from 1/],
      [['flow', name], /missing required argument 'id'/],
    ] as [string[], RegExp][]) {
      const bad = await cli(args);
      expect(bad.code, args.join(' ')).to.equal(2);
      expect(bad.stderr).to.match(message);
    }
  });

  it("job shows a flow job's parent and its children's counts (text and --json); a plain job has neither", async () => {
    const sources = uniqueQueue('src');
    await addReport(sources);
    const costs = await cli(['job', sources, 'costs']);
    expect(costs.code, costs.stderr).to.equal(0);
    expect(costs.stdout).to.match(new RegExp(`│ parent\\s+│ report-1 in queue ${name}\\s+│`));
    expect(costs.stdout).to.match(/│ children\s+│ 1 unprocessed\s+│/);
    const json = JSON.parse((await cli(['--json', 'job', sources, 'costs'])).stdout);
    expect(json.parent).to.deep.equal({ id: 'report-1', queue: name });
    expect(json.dependencies).to.deep.equal({ processed: 0, unprocessed: 1, ignored: 0, failed: 0 });
    const top = JSON.parse((await cli(['--json', 'job', name, 'report-1'])).stdout);
    expect(top).to.deep.include({ state: 'waiting-children', parent: null });
    expect(top.dependencies).to.deep.equal({ processed: 0, unprocessed: 2, ignored: 0, failed: 0 });

    const plain = await q.add('plain', {});
    const text = await cli(['job', name, plain.id]);
    expect(text.stdout).to.not.match(/│ (parent|children) /);
    expect(JSON.parse((await cli(['--json', 'job', name, plain.id])).stdout)).to.deep.include({ parent: null, dependencies: null });
  });

  it('jobs --state waiting-children lists the waiting parents with what each waits for', async () => {
    const sources = uniqueQueue('src');
    await addReport(sources);
    const r = await cli(['jobs', sources, '--state', 'waiting-children']);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.match(/│ id\s+│ name\s+│\s+age │ attempts │ waits for\s+│/);
    expect(r.stdout).to.match(/│ costs\s+│ fetch\s+│\s+\S+ │\s+0\/1 │ 1 child\s+│/);
    expect(r.stdout).to.match(/showing 1-1 of 1 waiting-children jobs/);
    const json = await cli(['--json', 'jobs', name, '--state', 'waiting-children']);
    const lines = json.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines).to.have.length(1);
    expect(lines[0]).to.deep.include({ id: 'report-1', name: 'report', state: 'waiting-children', attemptsMade: 0, unprocessed: 2 });
    expect(lines[0].timestamp).to.be.a('number');
  });

  it('check stuck passes on a flow whose parents wait for children that have not run', async () => {
    const sources = uniqueQueue('src');
    await addReport(sources);
    const r = await cli(['--json', 'check', 'stuck', name, sources, '--older', '0']);
    expect(r.code, r.stderr).to.equal(0);
    const report = JSON.parse(r.stdout);
    expect(report.ok).to.equal(true);
    expect(report.queues.map((x: { details: { parentsWaiting: number; stuckParents: number } }) => [x.details.parentsWaiting, x.details.stuckParents])).to.deep.equal([
      [1, 0],
      [1, 0],
    ]);
  });
});
