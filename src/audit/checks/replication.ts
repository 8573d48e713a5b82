/**
 * Replication facts: replicas of a primary and their lag, or a replica's link to its primary.
 * Replication is asynchronous, so replicas improve availability, not the loss window.
 */
import type { Check, CheckModule, NodeFacts } from '../types.js';
import { infoField, infoNumber } from './util.js';

/** Replicas further behind than this are worth a look. */
const LAG_WARN_SECONDS = 10;
const ASYNC = 'replication is asynchronous, so a failover can still lose writes not yet copied';

function primary(facts: NodeFacts): Check {
  const id = 'replication';
  const replicas = facts.replicas;
  const expected = facts.inCluster ? `at least 1 replica online, lag under ${LAG_WARN_SECONDS}s` : `replicas optional; lag under ${LAG_WARN_SECONDS}s`;
  if (replicas.length === 0) {
    if (facts.inCluster) {
      return {
        id,
        status: 'warn',
        actual: '0 replicas',
        expected,
        message: 'this primary has no replica: if its host fails its slots are unavailable until it returns; add a replica',
      };
    }
    return {
      id,
      status: 'pass',
      actual: '0 replicas',
      expected,
      message: `no replicas: this node's disk is the only copy; add a replica for availability (${ASYNC})`,
    };
  }
  const described = replicas.map((r) => `${r.address} ${r.state}${r.lagSeconds === undefined ? '' : ` lag ${r.lagSeconds}s`}`);
  const actual = `${replicas.length} replica${replicas.length === 1 ? '' : 's'}: ${described.join(', ')}`;
  const behind = replicas.filter((r) => r.state !== 'online' || (r.lagSeconds ?? 0) > LAG_WARN_SECONDS);
  if (behind.length) {
    return {
      id,
      status: 'warn',
      actual,
      expected,
      message: `${behind.map((r) => r.address).join(', ')} not online or lagging: a failover now would lose more; check the network and replica load (${ASYNC})`,
    };
  }
  return { id, status: 'pass', actual, expected, message: `replicas are in sync; ${ASYNC}` };
}

function replica(facts: NodeFacts): Check {
  const id = 'replication';
  const expected = 'link to primary up';
  const link = infoField(facts, 'master_link_status');
  const master = `${infoField(facts, 'master_host') ?? '?'}:${infoField(facts, 'master_port') ?? '?'}`;
  if (link === undefined) {
    return { id, status: 'unknown', actual: 'unknown', expected, message: 'INFO replication did not report the link to the primary' };
  }
  const io = infoNumber(facts, 'master_last_io_seconds_ago');
  const actual = `primary ${master}, link ${link}${io !== undefined && io >= 0 ? `, last io ${io}s ago` : ''}`;
  if (link !== 'up') {
    return {
      id,
      status: 'warn',
      actual,
      expected,
      message: 'the link to the primary is down: this replica is falling behind and a failover to it would lose writes; check the primary and the network',
    };
  }
  return { id, status: 'pass', actual, expected, message: `replicating from its primary; ${ASYNC}` };
}

export const replicationChecks: CheckModule = (facts) => [facts.role === 'master' ? primary(facts) : replica(facts)];
