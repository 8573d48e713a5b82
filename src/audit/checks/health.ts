/**
 * Whether persistence is working right now, from INFO persistence: failed AOF writes or rewrites,
 * a failed snapshot, a dataset still loading, fsyncs that ran late.
 */
import type { Check, CheckModule, CheckStatus, NodeFacts } from '../types.js';
import { aofEnabled, infoField, infoNumber, unknownCheck } from './util.js';

interface Finding {
  status: CheckStatus;
  actual: string;
  advice: string;
}

function findings(facts: NodeFacts): Finding[] {
  const out: Finding[] = [];
  const bad = (field: string) => {
    const v = infoField(facts, field);
    return v !== undefined && v !== 'ok' ? v : undefined;
  };
  if (infoField(facts, 'loading') === '1' || infoField(facts, 'async_loading') === '1') {
    out.push({ status: 'warn', actual: 'loading', advice: 'the dataset is still loading; run the audit again once it is served' });
  }
  const aofWrite = bad('aof_last_write_status');
  if (aofWrite && aofEnabled(facts) !== false) {
    out.push({
      status: 'fail',
      actual: `aof_last_write_status=${aofWrite}`,
      advice: 'the last AOF write failed, so acknowledged writes are not reaching disk: check disk space and the server log',
    });
  }
  const rewrite = bad('aof_last_bgrewrite_status');
  if (rewrite) {
    out.push({
      status: 'fail',
      actual: `aof_last_bgrewrite_status=${rewrite}`,
      advice: 'the last AOF rewrite failed: the log keeps growing and restarts get slower; check disk space and fork limits',
    });
  }
  const bgsave = bad('rdb_last_bgsave_status');
  if (bgsave) {
    out.push({
      status: 'fail',
      actual: `rdb_last_bgsave_status=${bgsave}`,
      advice: 'the last snapshot failed: the on-disk copy is stale and writes may be refused; check disk space and the server log',
    });
  }
  const delayed = infoNumber(facts, 'aof_delayed_fsync') ?? 0;
  if (delayed > 0) {
    out.push({
      status: 'warn',
      actual: `aof_delayed_fsync=${delayed}`,
      advice: `${delayed} fsyncs ran late because the disk could not keep up, so the loss window was longer than a second; use faster storage`,
    });
  }
  return out;
}

const RANK: Record<CheckStatus, number> = { pass: 0, unknown: 1, warn: 2, fail: 3 };

function persistenceHealth(facts: NodeFacts): Check {
  const id = 'persistence-health';
  const expected = 'all statuses ok, not loading, no delayed fsync';
  if (infoField(facts, 'rdb_last_bgsave_status') === undefined && infoField(facts, 'aof_enabled') === undefined) {
    return unknownCheck(facts, id, expected, 'INFO persistence was not readable');
  }
  const found = findings(facts);
  if (found.length === 0) {
    return { id, status: 'pass', actual: 'ok', expected, message: 'the last AOF write, rewrite and snapshot all succeeded' };
  }
  const worst = found.reduce((a, b) => (RANK[b.status] > RANK[a.status] ? b : a));
  return {
    id,
    status: worst.status,
    actual: found.map((f) => f.actual).join(', '),
    expected,
    message: found.map((f) => f.advice).join('; '),
  };
}

export const healthChecks: CheckModule = (facts) => [persistenceHealth(facts)];
