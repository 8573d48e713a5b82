/** A queue must never evict: the eviction policy, and whether keys were already evicted. */
import type { Check, CheckModule, NodeFacts } from '../types.js';
import { infoField, infoNumber, setting, unknownCheck } from './util.js';

function evictionPolicy(facts: NodeFacts): Check {
  const id = 'maxmemory-policy';
  const expected = 'noeviction';
  const configured = setting(facts, id);
  const value = configured ?? infoField(facts, 'maxmemory_policy');
  if (value === undefined) return unknownCheck(facts, id, expected);
  const source = configured === undefined ? ' (from INFO memory)' : '';
  if (value === 'noeviction') {
    return {
      id,
      status: 'pass',
      actual: `${value}${source}`,
      expected,
      message: 'when memory runs out writes fail with an error instead of jobs disappearing',
    };
  }
  return {
    id,
    status: 'fail',
    actual: `${value}${source}`,
    expected,
    message: `set maxmemory-policy noeviction: ${value} deletes keys under memory pressure, and for a queue that means jobs vanish without a trace`,
  };
}

function evictedKeys(facts: NodeFacts): Check {
  const id = 'evicted-keys';
  const expected = '0';
  const evicted = infoNumber(facts, 'evicted_keys');
  if (evicted === undefined) return unknownCheck(facts, id, expected, 'INFO stats did not report evicted_keys');
  if (evicted === 0) {
    return { id, status: 'pass', actual: '0', expected, message: 'no key has been evicted since the server started' };
  }
  return {
    id,
    status: 'warn',
    actual: String(evicted),
    expected,
    message: `${evicted} keys were evicted since the server started; if any were glidemq keys those jobs are gone: set noeviction and give the server more memory`,
  };
}

export const memoryChecks: CheckModule = (facts) => [evictionPolicy(facts), evictedKeys(facts)];
