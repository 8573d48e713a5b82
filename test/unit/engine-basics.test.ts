import { expect } from 'chai';
import { parseDuration, parseInteger } from '../../src/engine/shared/duration.js';
import { InvalidArgumentError } from '../../src/engine/shared/errors.js';
import { QueueKeys, queueFromKey, validateQueueName } from '../../src/engine/shared/keys.js';
import { backoffDelay, encodeJob, encodeRetention, parseBackoff } from '../../src/engine/producing/options.js';
import { encodeBulkJobs } from '../../src/engine/producing/bulk-add.js';
import { parseUrl, redactUrl } from '../../src/engine/connecting/connection.js';
import { compareVersions, LIBRARY_CODE, LIBRARY_VERSION } from '../../src/engine/connecting/library.js';
import { parseNdjson } from '../../src/cli/input.js';

describe('durations and numbers', () => {
  it('parses ms and units', () => {
    expect(parseDuration('250')).to.equal(250);
    expect(parseDuration('250ms')).to.equal(250);
    expect(parseDuration('5s')).to.equal(5000);
    expect(parseDuration('2m')).to.equal(120_000);
    expect(parseDuration('1h')).to.equal(3_600_000);
    expect(parseDuration(12)).to.equal(12);
  });
  it('refuses bad durations naming the option', () => {
    for (const bad of ['-1', 'soon', '5x', '', '1e400']) {
      expect(() => parseDuration(bad, '--delay'), bad).to.throw(InvalidArgumentError, /--delay/);
    }
  });
  it('integers within bounds', () => {
    expect(parseInteger('3', '--n', 1, 5)).to.equal(3);
    for (const bad of ['0', '6', '1.5', 'x', '99999999999999999999']) expect(() => parseInteger(bad, '--n', 1, 5), bad).to.throw(/--n/);
  });
});

describe('keys', () => {
  it('every key of a queue shares the {queue} hash tag', () => {
    const k = new QueueKeys('emails', 'glide');
    for (const key of [k.meta, k.stream, k.wake, k.scheduled, k.prioritized, k.lifo, k.listActiveIds, k.listActive, k.completed, k.failed, k.events, k.job('1'), k.logs('1'), k.metrics('x'), k.group('g')]) {
      expect(key.startsWith('glide:{emails}:')).to.equal(true);
    }
    expect(queueFromKey('glide', 'glide:{emails}:meta')).to.equal('emails');
  });
  it('refuses names that break the hash tag', () => {
    for (const bad of ['a{b', 'a}b', 'a:b', 'a b', '', 'x'.repeat(201)]) expect(() => validateQueueName(bad), JSON.stringify(bad)).to.throw(InvalidArgumentError);
  });
});

describe('job options', () => {
  it('encodes the argument group glidemq_add takes', () => {
    const g = encodeJob('n', { a: 1 }, { delay: '2s', priority: 3, attempts: 4, backoff: 'exponential:100', removeOnComplete: 10 });
    expect(g.slice(0, 7)).to.deep.equal(['', 'n', '{"a":1}', 2000, 3, '0', 4]);
    expect(JSON.parse(String(g[7]))).to.deep.equal({ backoff: { type: 'exponential', delay: 100 }, removeOnComplete: 10 });
  });
  it('refuses out-of-range options with a message naming them', () => {
    expect(() => encodeJob('n', {}, { priority: -1 })).to.throw(/priority/);
    expect(() => encodeJob('n', {}, { priority: 1.5 })).to.throw(/priority/);
    expect(encodeJob('n', {}, { priority: 0, lifo: true }).slice(4, 6)).to.deep.equal([0, '1']); // 0: none, as BullMQ reads it
    expect(() => encodeJob('n', {}, { priority: 2097153 })).to.throw(/priority/);
    expect(() => encodeJob('n', {}, { attempts: 0 })).to.throw(/attempts/);
    expect(() => encodeJob('n', {}, { jobId: 'a:b' })).to.throw(/job id/);
    expect(() => encodeJob('n', {}, { priority: 1, lifo: true })).to.throw(/both/);
    expect(() => encodeJob('', {})).to.throw(/name/);
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    expect(() => encodeJob('n', circular)).to.throw(/JSON/);
  });
  it('a bulk error names the 1-based position', () => {
    try {
      encodeBulkJobs([{ name: 'a', data: {} }, { name: 'b', data: {}, opts: { attempts: -1 } }], undefined, 1000);
      expect.fail('should throw');
    } catch (err) {
      expect((err as { index: number }).index).to.equal(2);
    }
  });
  it('backoff: fixed, exponential, jitter', () => {
    expect(parseBackoff('fixed:50')).to.deep.equal({ type: 'fixed', delay: 50 });
    expect(backoffDelay({ type: 'fixed', delay: 50 }, 3)).to.equal(50);
    expect(backoffDelay({ type: 'exponential', delay: 100 }, 1)).to.equal(100);
    expect(backoffDelay({ type: 'exponential', delay: 100 }, 3)).to.equal(400);
    expect(backoffDelay({ type: 'fixed', delay: 100, jitter: 0.5 }, 1, () => 1)).to.equal(50);
    expect(backoffDelay({ type: 'fixed', delay: 100, jitter: 0.5 }, 1, () => 0)).to.equal(100);
    expect(() => parseBackoff('linear:5')).to.throw(/fixed\|exponential/);
  });
  it('retention rules', () => {
    expect(encodeRetention(undefined)).to.equal('');
    expect(encodeRetention(true)).to.equal('0');
    expect(encodeRetention(5)).to.equal('count:5');
    expect(encodeRetention({ age: 1000 })).to.equal('age:1000000'); // BullMQ's KeepJobs: age in seconds
    expect(encodeRetention({ age: 1.5, count: 3 })).to.equal('agecount:1500:3');
    expect(encodeRetention({ age: 60, count: 0 })).to.equal('0');
  });
});

describe('connection URLs', () => {
  it('valkey schemes mean the redis ones, with the db number kept', () => {
    expect(parseUrl('valkey://h:7000/3')).to.include({ host: 'h', port: 7000, db: 3, tls: false, url: 'redis://h:7000/3' });
    expect(parseUrl('valkeys://u:p@h:6380')).to.include({ tls: true, username: 'u', password: 'p', port: 6380 });
  });
  it('redacts passwords', () => {
    expect(redactUrl('redis://user:secret@host:1')).to.equal('redis://user:***@host:1');
    expect(redactUrl('redis://:secret@host:1')).to.equal('redis://:***@host:1');
    expect(redactUrl('redis://host:1')).to.equal('redis://host:1');
  });
  it('refuses other schemes', () => {
    expect(() => parseUrl('http://h')).to.throw(/scheme/);
  });
});

describe('the function library', () => {
  it('is named glidemq and versioned by a hash of its source', () => {
    expect(LIBRARY_CODE.startsWith('#!lua name=glidemq\n')).to.equal(true);
    expect(LIBRARY_VERSION).to.match(/^[0-9a-f]{16}$/);
    expect(LIBRARY_CODE).to.contain(LIBRARY_VERSION);
  });
  it('compares package versions', () => {
    expect(compareVersions('0.2.0', '0.1.9')).to.be.above(0);
    expect(compareVersions('1.0.0', '1.0.0')).to.equal(0);
    expect(compareVersions('1.0', '1.0.1')).to.be.below(0);
  });
});

describe('NDJSON input', () => {
  const defaults = { name: 'd', opts: {} };
  it('parses lines and skips blank ones', () => {
    const jobs = parseNdjson(Buffer.from('{"a":1}\n\n{"a":2}\r\n'), false, defaults);
    expect(jobs.map((j) => [j.line, j.data])).to.deep.equal([[1, { a: 1 }], [3, { a: 2 }]]);
  });
  it('an envelope keeps null data as null; one without data gets {}', () => {
    const jobs = parseNdjson(Buffer.from('{"name":"a","data":null}\n{"name":"b"}\n'), true, defaults);
    expect(jobs.map((j) => [j.name, j.data])).to.deep.equal([['a', null], ['b', {}]]);
  });
  it('names the bad line', () => {
    expect(() => parseNdjson(Buffer.from('{"a":1}\n{x\n'), false, defaults)).to.throw(/line 2/);
    expect(() => parseNdjson(Buffer.from('{"data":1}\n[1]\n'), true, defaults)).to.throw(/line 2: an envelope/);
    expect(() => parseNdjson(Buffer.from('{"name":"a","extra":1}\n'), true, defaults)).to.throw(/line 1: unknown envelope field "extra"/);
    expect(() => parseNdjson(Buffer.concat([Buffer.from('{"a":1}\n'), Buffer.from([0x22, 0xff, 0xfe, 0x22, 0x0a])]), false, defaults)).to.throw(/line 2: input is not valid UTF-8/);
  });
});
