/**
 * Whether writes reach disk at all, and how soon: AOF on, its fsync policy, the RDB preamble,
 * the overall persistence mode (what a crash would lose) and the snapshot schedule next to AOF.
 */
import type { Check, CheckModule, NodeFacts } from '../types.js';
import { aofEnabled, infoNumber, saveRules, setting, unknownCheck } from './util.js';

/** Saves more often than this, next to AOF, are fork pressure without a durability gain. */
const FREQUENT_SAVE_SECONDS = 60;

const inactiveNote = (facts: NodeFacts) => (aofEnabled(facts) === false ? ' (not in effect while appendonly is no)' : '');

function appendonly(facts: NodeFacts): Check {
  const expected = 'yes';
  const on = aofEnabled(facts);
  if (on === undefined) return unknownCheck(facts, 'appendonly', expected);
  const source = setting(facts, 'appendonly') === undefined ? ' (from INFO aof_enabled)' : '';
  if (on) {
    return {
      id: 'appendonly',
      status: 'pass',
      actual: `yes${source}`,
      expected,
      message: 'every write goes to the append-only file, so queue state survives a restart',
    };
  }
  const managed = facts.configRefused
    ? '; if your provider does not offer AOF, rely on its replicas with automatic failover and accept the snapshot loss window'
    : '';
  return {
    id: 'appendonly',
    status: 'fail',
    actual: `no${source}`,
    expected,
    message: `set appendonly yes: without the append-only file a crash loses every job written since the last snapshot${managed}`,
  };
}

function appendfsync(facts: NodeFacts): Check {
  const expected = 'everysec (or always)';
  const value = setting(facts, 'appendfsync');
  if (value === undefined) return unknownCheck(facts, 'appendfsync', expected);
  const note = inactiveNote(facts);
  switch (value) {
    case 'everysec':
      return {
        id: 'appendfsync',
        status: 'pass',
        actual: value,
        expected,
        message: `fsync once a second: a power loss or host crash can lose about the last second of acknowledged writes (glidemq moves the job id counter on after a restart, so no id is handed out twice); use always if that is too much${note}`,
      };
    case 'always':
      return {
        id: 'appendfsync',
        status: 'pass',
        actual: value,
        expected,
        message: `fsync on every write: the smallest loss window, paid for in write latency and throughput; benchmark your load with it${note}`,
      };
    default:
      return {
        id: 'appendfsync',
        status: 'fail',
        actual: value,
        expected,
        message: `set appendfsync everysec: with "${value}" the OS flushes when it likes (often tens of seconds), so a host crash can drop many acknowledged jobs${note}`,
      };
  }
}

function preamble(facts: NodeFacts): Check {
  const expected = 'yes';
  const value = setting(facts, 'aof-use-rdb-preamble');
  if (value === undefined) return unknownCheck(facts, 'aof-use-rdb-preamble', expected);
  const note = inactiveNote(facts);
  if (value === 'yes') {
    return {
      id: 'aof-use-rdb-preamble',
      status: 'pass',
      actual: value,
      expected,
      message: `the AOF base is an RDB image: faster restarts with the same AOF guarantees${note}`,
    };
  }
  return {
    id: 'aof-use-rdb-preamble',
    status: 'warn',
    actual: value,
    expected,
    message: `set aof-use-rdb-preamble yes: without it a restart replays the whole log command by command and takes longer${note}`,
  };
}

function longestInterval(rules: [number, number][]): number {
  return rules.reduce((max, [seconds]) => Math.max(max, seconds), 0);
}

function persistenceMode(facts: NodeFacts): Check {
  const id = 'persistence-mode';
  const expected = 'aof (snapshots optional)';
  const on = aofEnabled(facts);
  if (on === undefined) return unknownCheck(facts, id, expected);
  const save = setting(facts, 'save');
  const rules = save === undefined ? undefined : saveRules(save);
  if (on) {
    const mode = rules === undefined ? 'aof' : rules.length ? 'aof+rdb' : 'aof';
    return { id, status: 'pass', actual: mode, expected, message: 'the append-only file carries the queue; snapshots, if any, are backups' };
  }
  const pending = infoNumber(facts, 'rdb_changes_since_last_save');
  const pendingText = pending === undefined ? '' : ` (${pending} change${pending === 1 ? '' : 's'} since the last one right now)`;
  if (rules === undefined) {
    return {
      id,
      status: 'fail',
      actual: 'no aof (snapshots unknown)',
      expected,
      message: `set appendonly yes: without AOF a crash loses at least every write since the last snapshot${pendingText}`,
    };
  }
  if (rules.length === 0) {
    return {
      id,
      status: 'fail',
      actual: 'none',
      expected,
      message: 'nothing is written to disk: a restart or crash loses every job, every consumer group and the library; set appendonly yes',
    };
  }
  return {
    id,
    status: 'fail',
    actual: 'rdb-only',
    expected,
    message: `snapshots only: a crash loses every write since the last snapshot, up to ${longestInterval(rules)}s of jobs${pendingText}; set appendonly yes`,
  };
}

function saveSchedule(facts: NodeFacts): Check {
  const id = 'save';
  const expected = `none, or intervals of ${FREQUENT_SAVE_SECONDS}s or more next to AOF`;
  const save = setting(facts, 'save');
  if (save === undefined) return unknownCheck(facts, id, expected);
  const rules = saveRules(save);
  const actual = save.trim() === '' ? '""' : save.trim();
  const on = aofEnabled(facts);
  if (on === false) {
    return {
      id,
      status: 'warn',
      actual,
      expected,
      message: rules.length
        ? 'these snapshots are the only copy on disk; turn on AOF and keep them for backups'
        : 'no snapshots and no AOF: nothing reaches disk; turn on AOF',
    };
  }
  const frequent = rules.filter(([seconds]) => seconds < FREQUENT_SAVE_SECONDS);
  if (frequent.length) {
    return {
      id,
      status: 'warn',
      actual,
      expected,
      message: `snapshots every ${frequent.map(([s]) => `${s}s`).join(', ')} next to AOF add fork and disk pressure for no durability gain; space them out (e.g. save 60 10000) or drop them`,
    };
  }
  return {
    id,
    status: 'pass',
    actual,
    expected,
    message: rules.length
      ? 'snapshots serve as backups next to AOF; tune them against write volume'
      : 'no snapshots: AOF carries durability; add a schedule such as save 60 10000 only for backups',
  };
}

export const persistenceChecks: CheckModule = (facts) => [
  appendonly(facts),
  appendfsync(facts),
  preamble(facts),
  persistenceMode(facts),
  saveSchedule(facts),
];
