import { expect } from 'chai';
import { matchSubject, subjectFilter, validatePattern, validateSubject } from '../../src/engine/shared/subjects.js';
import { InvalidArgumentError } from '../../src/engine/shared/errors.js';

describe('broadcast subject filters', () => {
  const cases: [string, string, boolean][] = [
    ['orders', 'orders', true],
    ['orders', 'orders.eu', false],
    ['orders.created', 'orders.created', true],
    ['orders.created', 'orders.updated', false],
    ['orders.*', 'orders.created', true],
    ['orders.*', 'orders', false],
    ['orders.*', 'orders.eu.created', false],
    ['orders.*.created', 'orders.eu.created', true],
    ['orders.*.created', 'orders.eu.updated', false],
    ['*.created', 'orders.created', true],
    ['*', 'orders', true],
    ['*', 'orders.eu', false],
    ['orders.>', 'orders.eu', true],
    ['orders.>', 'orders.eu.created', true],
    ['orders.>', 'orders', false],
    ['orders.>', 'invoices.eu', false],
    ['>', 'anything', true],
    ['>', 'any.thing.at.all', true],
    ['*.>', 'orders', false],
    ['*.>', 'orders.eu', true],
    ['orders.*.>', 'orders.eu', false],
    ['orders.*.>', 'orders.eu.created.v2', true],
    ['order', 'orders', false],
    ['orders.eu', 'orders.e', false],
  ];
  for (const [pattern, subject, expected] of cases) {
    it(`${pattern} ${expected ? 'matches' : 'does not match'} ${subject}`, () => {
      expect(matchSubject(pattern, subject)).to.equal(expected);
    });
  }

  it('a filter list matches when any filter does; no filters match everything', () => {
    const f = subjectFilter(['orders.*', 'invoices.>']);
    expect(f('orders.created')).to.equal(true);
    expect(f('invoices.eu.paid')).to.equal(true);
    expect(f('users.created')).to.equal(false);
    expect(subjectFilter([])('whatever.here')).to.equal(true);
    expect(subjectFilter(undefined)('x')).to.equal(true);
  });

  it('refuses malformed filters and subjects', () => {
    for (const bad of ['', 'orders..x', '.orders', 'orders.', 'orders.>.x', 'orders.a*', 'a>', 'has space']) {
      expect(() => validatePattern(bad), bad).to.throw(InvalidArgumentError);
    }
    for (const bad of ['', 'orders.*', 'orders.>', 'a..b', 'tab\there']) {
      expect(() => validateSubject(bad), bad).to.throw(InvalidArgumentError);
    }
    expect(validateSubject('orders.eu-west.created_v2')).to.equal('orders.eu-west.created_v2');
    expect(() => subjectFilter(['ok.*', 'bad..'])).to.throw(InvalidArgumentError);
  });
});
