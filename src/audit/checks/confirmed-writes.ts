/**
 * Confirmed writes (README "Confirmed writes"), per primary: whether `confirm: { fsync }` can work
 * (AOF on, WAITAOF available), how many replicas `confirm: { replicas: n }` can count on now, and
 * what min-replicas-to-write is set to, with the advice that fits.
 */
import type { Check, CheckModule, NodeFacts } from '../types.js';
import { aofEnabled, infoField, setting } from './util.js';
import { waitaofAcksBeforeFsync } from '../../engine/producing/confirm.js';

function confirmability(facts: NodeFacts): Check {
  const id = 'confirmed-writes';
  const expected = 'AOF on and WAITAOF available (confirm fsync); replicas connected (confirm replicas)';
  const aof = aofEnabled(facts);
  const online = facts.replicas.filter((r) => r.state === 'online').length;
  const waitaof = facts.waitaof;
  const actual = `AOF ${aof ? 'on' : 'off'}, ${online} replica${online === 1 ? '' : 's'} connected, WAITAOF ${waitaof === undefined ? 'unknown' : waitaof ? 'available' : 'missing'}`;
  const replicas = online === 0
    ? 'no replica is connected, so confirm: { replicas: n } would time out; add a replica to survive a failover'
    : `confirm: { replicas: ${online} } (at most) holds: use replicas: 1 to survive a failover`;
  if (aof === undefined || waitaof === undefined) {
    return { id, status: 'unknown', actual: 'unknown', expected, message: `could not read appendonly or COMMAND INFO WAITAOF; ${replicas}` };
  }
  if (!waitaof) {
    return { id, status: 'warn', actual, expected, message: `this server has no WAITAOF (older than Valkey 8 / Redis 7.2): confirm fsync is refused; upgrade, and meanwhile ${replicas}` };
  }
  if (!aof) {
    return { id, status: 'warn', actual, expected, message: `appendonly is no: confirm fsync is refused; set appendonly yes; ${replicas}` };
  }
  const server = infoField(facts, 'server_name') === 'valkey'
    ? { name: 'valkey', version: infoField(facts, 'valkey_version') ?? '0.0.0' }
    : { name: 'redis', version: infoField(facts, 'redis_version') ?? '0.0.0' };
  const appendfsync = setting(facts, 'appendfsync');
  if (waitaofAcksBeforeFsync(server, appendfsync)) {
    const policy = appendfsync === undefined ? 'appendfsync unknown (CONFIG GET refused)' : `appendfsync ${appendfsync}`;
    // a pass: everysec is the recommended baseline; only confirm fsync is unavailable, and glidemq refuses it
    return { id, status: 'pass', actual: `${actual}, ${server.name} ${server.version}, ${policy}`, expected, message: `this server's WAITAOF acknowledges writes before they are fsynced unless appendfsync is always: confirm fsync is refused; set appendfsync always to use it; ${replicas}` };
  }
  return { id, status: 'pass', actual, expected, message: `confirm: { fsync: true } works here (an acknowledged add survives a crash); ${replicas}` };
}

function minReplicas(facts: NodeFacts): Check {
  const id = 'min-replicas-to-write';
  const value = facts.config.get('min-replicas-to-write');
  const lag = facts.config.get('min-replicas-max-lag');
  const online = facts.replicas.filter((r) => r.state === 'online').length;
  const expected = 'no more than the replicas connected; 1 with replicas, so a primary cut off from them stops acknowledging';
  if (value === undefined) return { id, status: 'unknown', actual: 'unknown', expected, message: 'could not read min-replicas-to-write (CONFIG GET refused)' };
  const n = Number(value);
  const actual = `${n}${lag === undefined ? '' : ` (max lag ${lag}s)`}, ${online} replica${online === 1 ? '' : 's'} connected`;
  if (n > online) {
    return { id, status: 'fail', actual, expected, message: `the primary refuses every write now (NOREPLICAS): ${online} of the ${n} replicas it asks for are connected; bring replicas back or lower min-replicas-to-write` };
  }
  if (online > 0 && n === 0) {
    return { id, status: 'pass', actual, expected, message: 'a primary cut off from its replicas keeps acknowledging writes a failover would lose: set min-replicas-to-write 1 (with min-replicas-max-lag 10), or confirm adds with replicas: 1' };
  }
  return { id, status: 'pass', actual, expected, message: n === 0 ? 'no replicas, nothing to ask of them' : `a primary that loses its replicas stops acknowledging writes (confirm with replicas: ${n} to know each add is held)` };
}

export const confirmedWriteChecks: CheckModule = (facts) => (facts.role === 'master' ? [confirmability(facts), minReplicas(facts)] : []);

/** The audit's verdict on a node for confirmed writes and the baseline: no check of it fails. */
export function durableVerdict(checks: Check[]): boolean {
  return checks.every((c) => c.status !== 'fail');
}
