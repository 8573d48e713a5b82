import { expect } from 'chai';
import { Queue } from '../../src/engine/queue/queue.js';
import { EventLog } from '../../src/engine/operating/event-log.js';
import { runCli } from '../helpers/cli.js';
import { useCliSuite } from '../helpers/cli-suite.js';
import { uniqueQueue } from '../helpers/engine.js';
import { freePort, waitFor } from '../helpers/valkey.js';
import { inParallel } from '../helpers/parallel.js';

interface Line {
  id: string;
  ts: number;
  event: string;
  jobId: string;
  details: Record<string, string>;
}

const ndjson = (text: string): Line[] =>
  text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Line);

describe('CLI: events', function () {
  this.timeout(60000);
  let q: Queue;
  let name: string;
  const { server, cli, start, harness } = useCliSuite('ev', (made) => ({ q, name } = made));

  it('prints the recent events in order as lines, and as NDJSON with --json', async () => {
    await q.add('mail', { n: 1 });
    await q.add('mail', { n: 2 }, { delay: 60_000 });
    await q.pause();
    await q.resume();
    const text = await cli(['events', name]);
    expect(text.code, text.stderr).to.equal(0);
    const lines = text.stdout.trim().split('\n');
    expect(lines.map((l) => l.split(/\s+/)[3])).to.deep.equal(['added', 'added', 'paused', 'resumed']);
    expect(lines[0]).to.match(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d\d:\d\d {2}added +1$/);
    expect(lines[1]).to.match(/added +2 +delay=60000$/);
    for (const l of lines) expect(l.length).to.be.at.most(80);

    const json = await cli(['events', name, '--json']);
    expect(json.code, json.stderr).to.equal(0);
    const events = ndjson(json.stdout);
    expect(events.map((e) => [e.event, e.jobId])).to.deep.equal([['added', '1'], ['added', '2'], ['paused', ''], ['resumed', '']]);
    expect(events[1].details).to.deep.equal({ delay: '60000' });
    // the keys CLI.md names for events --json; ts: the entry's time, the server's clock
    for (const e of events) expect(e).to.include.all.keys('id', 'event', 'jobId', 'ts');
    expect(events[0].ts).to.equal(Number(events[0].id.split('-')[0]));
  });

  it('--limit keeps the newest; --since reads after an id', async () => {
    for (let i = 0; i < 5; i++) await q.add('x', { i });
    const all = ndjson((await cli(['events', name, '--json'])).stdout);
    expect(all.map((e) => e.jobId)).to.deep.equal(['1', '2', '3', '4', '5']);
    const last2 = ndjson((await cli(['events', name, '--json', '--limit', '2'])).stdout);
    expect(last2.map((e) => e.jobId)).to.deep.equal(['4', '5']);
    const after = ndjson((await cli(['events', name, '--json', '--since', all[1].id])).stdout);
    expect(after.map((e) => e.jobId)).to.deep.equal(['3', '4', '5']);
    const firstAfter = ndjson((await cli(['events', name, '--json', '--since', '0', '--limit', '2'])).stdout);
    expect(firstAfter.map((e) => e.jobId)).to.deep.equal(['1', '2']);
    const none = await cli(['events', name, '--since', all[4].id]);
    expect(none.code).to.equal(0);
    expect(none.stdout).to.equal('');
    expect(none.stderr).to.match(/no events in/);
  });

  it('--follow prints the recent events, then new ones live (per-job events too), until SIGTERM: exit 0', async () => {
    await q.add('first', {});
    const follow = start(['events', name, '--follow', '--json']);
    try {
      await waitFor(() => follow.stdout().includes('"jobId":"1"'), 'the recent event');
      // it listens: the per-job events (active, completed) are written from now on
      await waitFor(async () => (await q.client.hget(q.keys.meta, 'eventsUntil')) !== null, 'the presence of the follow');
      harness.worker(name, async (job) => ({ done: job.id }));
      await q.add('second', {});
      await waitFor(() => ndjson(follow.stdout()).some((e) => e.event === 'completed' && e.jobId === '2'), 'job 2 completed, live');
    } finally {
      const r = await follow.stop('SIGTERM');
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stderr).to.equal('');
      const events = ndjson(r.stdout);
      const ids = events.map((e) => e.id);
      expect(new Set(ids).size, 'no event twice').to.equal(ids.length);
      expect(events.filter((e) => e.jobId === '1').map((e) => e.event)).to.include('completed');
      expect(events.filter((e) => e.jobId === '2').map((e) => e.event)).to.include.members(['added', 'active', 'completed']);
      expect(events.find((e) => e.event === 'completed' && e.jobId === '2')?.details.returnvalue).to.equal('{"done":"2"}');
    }
  });

  it('--follow --limit 0 prints only new events; SIGINT stops it with exit 0', async () => {
    await q.add('old', {});
    const follow = start(['events', name, '-f', '--limit', '0']);
    try {
      await waitFor(async () => (await q.client.hget(q.keys.meta, 'eventsUntil')) !== null, 'the presence of the follow');
      await q.add('new', {}, { jobId: 'fresh' });
      await waitFor(() => /added +fresh/.test(follow.stdout()), 'the new event');
    } finally {
      const r = await follow.stop('SIGINT');
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stdout).not.to.match(/added +1\b/);
    }
  });

  it('--follow --since reads from that id on', async () => {
    await q.add('a', {});
    await q.add('b', {});
    const first = ndjson((await cli(['events', name, '--json'])).stdout)[0];
    const follow = start(['events', name, '-f', '--since', first.id, '--json']);
    try {
      await waitFor(() => ndjson(follow.stdout()).some((e) => e.jobId === '2'), 'the event after the id');
    } finally {
      const r = await follow.stop();
      expect(r.code, r.stderr).to.equal(0);
      expect(ndjson(r.stdout).map((e) => e.jobId)).to.deep.equal(['2']);
    }
  });

  it('a queue never used: a warning, nothing printed, exit 0, no key written', async () => {
    const ghost = uniqueQueue('ghost');
    const r = await cli(['events', ghost]);
    expect(r.code).to.equal(0);
    expect(r.stderr).to.match(new RegExp(`queue "${ghost}" does not exist`));
    expect(await q.client.keys(`glide:{${ghost}}:*`)).to.deep.equal([]);
    // following it writes nothing either (no listening presence on a queue that is not there)
    const follow = start(['events', ghost, '--follow']);
    try {
      await waitFor(async () => /cmd=xread\s/.test(String(await q.client.client('LIST'))), 'the follow blocking on the stream');
      expect(await q.client.keys(`glide:{${ghost}}:*`)).to.deep.equal([]);
    } finally {
      const r = await follow.stop();
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stderr).to.match(/does not exist/);
    }
  });

  it('bad input and no server: one line on stderr, exit 2', async () => {
    const port = await freePort();
    const cases: [string[], RegExp][] = [
      [['events', name, '--limit', 'x'], /--limit must be a whole number/],
      [['events', name, '--limit', '0'], /--limit must be a whole number from 1/],
      [['events', name, '--since', 'yesterday'], /--since must be a stream id/],
      [['events', 'bad{name'], /invalid queue name/],
      [['-u', `redis://127.0.0.1:${port}`, 'events', name], /cannot reach/],
      [['-u', `redis://127.0.0.1:${port}`, 'events', name, '--follow'], /cannot reach/],
    ];
    await inParallel(cases, async ([args, message]) => {
      const r = args[0] === '-u' ? await runCli(args) : await cli(args);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(2);
      expect(r.stderr, args.join(' ')).to.match(message);
      expect(r.stderr.trim().split('\n')).to.have.length(1);
    });
  });

  it('EventLog (engine): recent() and follow() hand over the stored fields', async () => {
    const log = new EventLog(name, { connection: server().url });
    try {
      await q.add('x', {});
      const [e] = await log.recent();
      expect(e).to.include({ event: 'added', jobId: '1' });
      const seen: string[] = [];
      const following = log.follow({ onEvent: (ev) => seen.push(`${ev.event}:${ev.jobId}`) });
      await waitFor(async () => (await q.client.hget(q.keys.meta, 'eventsUntil')) !== null, 'the presence');
      await q.add('y', {});
      await waitFor(() => seen.includes('added:2'), 'the live event');
      await log.close();
      await following;
      expect(seen).to.deep.equal(['added:2']);
    } finally {
      await log.close();
    }
  });
});
