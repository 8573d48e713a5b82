/**
 * A job's options as read from its hash (job-fields.ts): the jobs that share one options text
 * (a worker reads it once and copies it) each get an object of their own, equal to what
 * JSON.parse gives, with the fields kept beside the options.
 */
import { expect } from 'chai';
import { readOptions } from '../../src/engine/jobs/job-fields.js';

describe('job options read from the hash (job-fields.ts)', () => {
  it('jobs sharing an options text get equal objects of their own, in the stored order', () => {
    const text = '{"removeOnComplete":true,"keepLogs":5,"jobId":"a","1":null}';
    const a = readOptions({ opts: text, attempts: '3' });
    const b = readOptions({ opts: String(Buffer.from(text)), delay: '10' });
    expect(a).to.not.equal(b);
    expect(Object.keys(b)).to.deep.equal(Object.keys(a));
    expect(b).to.deep.equal({ ...JSON.parse(text), attempts: 1, delay: 10, priority: 0, lifo: false });
    expect(a).to.deep.equal({ ...JSON.parse(text), attempts: 3, delay: 0, priority: 0, lifo: false });
    a.keepLogs = 9;
    expect(readOptions({ opts: text }).keepLogs, 'a change to one job is not seen by the next').to.equal(5);
  });

  it('nested options are parsed per job (no object is shared), and odd texts read as before', () => {
    const text = '{"backoff":{"type":"fixed","delay":5},"removeOnFail":{"count":2}}';
    const a = readOptions({ opts: text });
    const b = readOptions({ opts: text });
    expect(a.backoff).to.deep.equal({ type: 'fixed', delay: 5 });
    expect(a.backoff).to.not.equal(b.backoff);
    const proto = '{"__proto__":{"x":1},"y":2}';
    for (let i = 0; i < 2; i++) {
      const o = readOptions({ opts: proto }) as unknown as Record<string, unknown>;
      expect(Object.getPrototypeOf(o)).to.equal(Object.prototype);
      expect(Object.keys(o)).to.include('__proto__');
    }
    for (const odd of [undefined, '', 'not json', '[1]', 'null', '7']) {
      expect(readOptions({ ...(odd === undefined ? {} : { opts: odd }) }), String(odd)).to.deep.equal({ attempts: 1, delay: 0, priority: 0, lifo: false });
    }
  });
});
