import { expect } from 'chai';
import { readFileSync, readdirSync } from 'node:fs';
import { Queue } from '../../src/engine/queue/queue.js';
import { runCli } from '../helpers/cli.js';
import { uniqueQueue } from '../helpers/engine.js';
import { fixturePath } from '../helpers/fixtures.js';
import { useServer } from '../helpers/valkey.js';

// Each file in fixtures/bad/ names the line that is wrong: `...-line-<n>.ndjson`.
describe('CLI: the bad inputs in fixtures/bad/', function () {
  this.timeout(60000);
  const server = useServer();
  const files = readdirSync(fixturePath('bad')).filter((f) => f.endsWith('.ndjson'));

  it('has bad inputs to try', () => {
    expect(files.length).to.be.at.least(3);
  });

  for (const file of files) {
    it(`${file}: exit 2, names line ${/-line-(\d+)/.exec(file)?.[1]}, enqueues nothing`, async () => {
      const name = uniqueQueue('bad');
      const envelope = file.startsWith('envelope') ? ['--envelope'] : [];
      const r = await runCli(['-u', server().url, 'enqueue', name, '--ndjson', ...envelope], {
        input: readFileSync(fixturePath('bad', file)),
      });
      expect(r.code).to.equal(2);
      expect(r.stderr).to.contain(`line ${/-line-(\d+)/.exec(file)?.[1]}:`);
      expect(r.stderr.trim().split('\n')).to.have.length(1);
      const q = new Queue(name, { connection: server().url });
      const c = await q.getJobCounts();
      await q.close();
      expect(c.waiting + c.prioritized).to.equal(0);
    });
  }
});
