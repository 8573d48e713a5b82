/**
 * What one sentinel's view says about the set: it answers, it monitors the master under the URL's
 * name at the address the others name, the quorum and failover authorization can be reached
 * (CKQUORUM), it sees a replica a failover could promote, and it knows enough other sentinels.
 */
import { formatAddress } from './discovery.js';
import type { Check } from './types.js';

/** What one sentinel answered (gathered in sentinel.ts). */
export interface SentinelFacts {
  address: string;
  /** The master name asked about. */
  name: string;
  /** Why the sentinel could not be asked anything. */
  unreachable?: string;
  /** SENTINEL MASTER <name>; absent when refused (masterError). */
  master?: Map<string, string>;
  masterError?: string;
  /** SENTINEL CKQUORUM <name>: OK (its text), or the refusal. */
  quorum?: { ok: boolean; text: string };
  /** SENTINEL REPLICAS <name>, each as its fields. */
  replicas?: Map<string, string>[];
  replicasError?: string;
}

/** Flags under which a sentinel would not promote a replica (or sees the master as down). */
const DOWN = /\b(s_down|o_down|disconnected)\b/;

/** Sentinels fewer than this cannot lose one and still form a majority. */
const MIN_SENTINELS = 3;

function reachable(f: SentinelFacts): Check {
  if (f.unreachable) {
    return {
      id: 'sentinel',
      status: 'fail',
      actual: `unreachable (${f.unreachable})`,
      expected: 'answers',
      message: 'this sentinel does not answer: with fewer sentinels up a failover may not reach its quorum; bring it back (or take it out of the URL)',
    };
  }
  return { id: 'sentinel', status: 'pass', actual: 'answers', expected: 'answers', message: 'the sentinel answers' };
}

function master(f: SentinelFacts, agreed: string): Check {
  const id = 'sentinel-master';
  const expected = `knows "${f.name}" at ${agreed}`;
  if (!f.master) {
    return {
      id,
      status: 'fail',
      actual: `unknown (${f.masterError ?? 'no answer'})`,
      expected,
      message: `this sentinel does not monitor "${f.name}": it takes no part in a failover; add "sentinel monitor ${f.name} <ip> <port> <quorum>" to its config`,
    };
  }
  const address = formatAddress(f.master.get('ip') ?? '?', Number(f.master.get('port')));
  const flags = f.master.get('flags') ?? '';
  const actual = `${address} (${flags})`;
  if (address !== agreed) {
    return {
      id,
      status: 'fail',
      actual,
      expected,
      message: 'this sentinel names another primary than the others: a split view (a failover it missed, or another set under the same name); compare SENTINEL MASTER on each sentinel',
    };
  }
  if (DOWN.test(flags)) {
    return {
      id,
      status: 'fail',
      actual,
      expected,
      message: 'this sentinel sees the primary as down: writes fail until a failover completes; check the primary and the network between them',
    };
  }
  return { id, status: 'pass', actual, expected, message: 'the sentinel monitors the primary the others name' };
}

function quorum(f: SentinelFacts): Check {
  const id = 'sentinel-quorum';
  const q = f.master?.get('quorum');
  const expected = 'quorum and failover authorization reachable';
  if (!f.quorum) return { id, status: 'unknown', actual: 'unknown', expected, message: 'SENTINEL CKQUORUM could not be asked' };
  const usable = /(\d+) usable Sentinels?/i.exec(f.quorum.text)?.[1];
  if (f.quorum.ok) {
    return { id, status: 'pass', actual: `${usable ?? '?'} usable, quorum ${q ?? '?'}`, expected, message: 'enough sentinels are up to agree on a failover and authorize it' };
  }
  return {
    id,
    status: 'fail',
    actual: f.quorum.text.replace(/^NOQUORUM\s*/, '').slice(0, 120),
    expected,
    message: 'a failover could not happen now (SENTINEL CKQUORUM): bring sentinels back until a majority of them, and the quorum, are up',
  };
}

function replicas(f: SentinelFacts): Check {
  const id = 'sentinel-replicas';
  const expected = 'at least 1 replica it could promote';
  if (!f.replicas) {
    return { id, status: 'unknown', actual: 'unknown', expected, message: `SENTINEL REPLICAS did not answer (${f.replicasError ?? 'no reply'})` };
  }
  const described = f.replicas.map((r) => {
    const flags = r.get('flags') ?? '';
    const link = r.get('master-link-status');
    const good = !DOWN.test(flags) && link !== 'err';
    return { good, text: `${formatAddress(r.get('ip') ?? '?', Number(r.get('port')))} ${good ? 'ok' : DOWN.exec(flags)?.[1] ?? `link ${link}`}` };
  });
  const good = described.filter((d) => d.good).length;
  const actual = described.length === 0 ? '0 replicas' : `${good}/${described.length} ok: ${described.map((d) => d.text).join(', ')}`;
  if (good === 0) {
    return {
      id,
      status: 'fail',
      actual,
      expected,
      message: 'no replica this sentinel could promote: if the primary fails, nothing takes over; add a replica (or bring it back) and let the sentinels see it',
    };
  }
  if (good < described.length) {
    return { id, status: 'warn', actual, expected, message: 'a replica is down or not linked to the primary: fewer copies to fail over to; bring it back' };
  }
  return { id, status: 'pass', actual, expected, message: 'the sentinel sees replicas it could promote' };
}

function peers(f: SentinelFacts, inUrl: number): Check {
  const id = 'sentinel-peers';
  const expected = `at least ${MIN_SENTINELS} sentinels`;
  const others = Number(f.master?.get('num-other-sentinels'));
  if (!Number.isFinite(others)) return { id, status: 'unknown', actual: 'unknown', expected, message: 'SENTINEL MASTER did not report num-other-sentinels' };
  const total = others + 1;
  const actual = `${total} known (${inUrl} in the URL)`;
  if (total < MIN_SENTINELS) {
    return {
      id,
      status: 'warn',
      actual,
      expected,
      message: `with ${total} sentinel${total === 1 ? '' : 's'} the loss of one leaves no majority to authorize a failover; run ${MIN_SENTINELS} or more on separate hosts`,
    };
  }
  return { id, status: 'pass', actual, expected, message: 'enough sentinels to survive the loss of one' };
}

export function sentinelChecks(f: SentinelFacts, agreedPrimary: string, sentinelsInUrl: number): Check[] {
  if (f.unreachable) return [reachable(f)];
  if (!f.master) return [reachable(f), master(f, agreedPrimary)];
  return [reachable(f), master(f, agreedPrimary), quorum(f), replicas(f), peers(f, sentinelsInUrl)];
}
