/**
 * AOF and snapshot knobs that quietly widen the loss window or hide broken persistence:
 * skipped fsyncs during rewrites, disabled automatic rewrites, writes accepted after a failed save.
 */
import type { Check, CheckModule, NodeFacts } from '../types.js';
import { saveRules, setting, settingCheck, unknownCheck } from './util.js';

function noFsyncOnRewrite(facts: NodeFacts): Check {
  return settingCheck(facts, {
    id: 'no-appendfsync-on-rewrite',
    expected: 'no',
    good: (v) => v === 'no',
    pass: 'fsync keeps running during rewrites and saves, so the loss window stays as configured',
    warn: 'set no-appendfsync-on-rewrite no: while a rewrite or save runs no fsync happens, so a crash then can lose up to ~30s of writes',
  });
}

function rewritePercentage(facts: NodeFacts): Check {
  return settingCheck(facts, {
    id: 'auto-aof-rewrite-percentage',
    expected: 'greater than 0 (e.g. 100)',
    good: (v) => Number(v) > 0,
    pass: 'the AOF is compacted automatically as it grows, keeping restarts short',
    warn: 'set auto-aof-rewrite-percentage 100: with 0 the log is never compacted, grows without bound and makes every restart slower',
  });
}

function stopWritesOnBgsaveError(facts: NodeFacts): Check {
  const id = 'stop-writes-on-bgsave-error';
  const expected = 'yes';
  const value = setting(facts, id);
  if (value === undefined) return unknownCheck(facts, id, expected);
  if (value === 'yes') {
    return { id, status: 'pass', actual: value, expected, message: 'a failed snapshot makes writes fail loudly instead of being silently unpersisted' };
  }
  const save = setting(facts, 'save');
  const snapshots = save !== undefined && saveRules(save).length > 0;
  if (!snapshots) {
    return { id, status: 'pass', actual: value, expected, message: 'no snapshot schedule, so there is no failed save to stop writes on' };
  }
  return {
    id,
    status: 'warn',
    actual: value,
    expected,
    message: 'set stop-writes-on-bgsave-error yes: otherwise producers keep enqueueing while snapshots fail and nobody notices',
  };
}

export const aofTuningChecks: CheckModule = (facts) => [
  noFsyncOnRewrite(facts),
  rewritePercentage(facts),
  stopWritesOnBgsaveError(facts),
];
