/**
 * Auditing through Valkey Sentinel: ask every sentinel of the URL what it knows of the master
 * (SENTINEL MASTER, CKQUORUM, REPLICAS), audit the primary they name and its replicas like any
 * other node, and report each sentinel's view as a node of its own (sentinel-checks.ts).
 */
import { Redis, type RedisOptions } from 'ioredis';
import { type ClientSettings, parseUrl, redisOptionsFromUrl } from '../engine/connecting/connection.js';
import { ConnectionError } from '../engine/shared/errors.js';
import {
  describeSentinelFailure, formatSentinel, sentinelCredentials, sentinelReason, type SentinelAddress, type SentinelTarget,
} from '../engine/connecting/sentinel.js';
import { formatAddress } from './discovery.js';
import { sentinelChecks, type SentinelFacts } from './sentinel-checks.js';
import type { NodeReport, NodeRole } from './types.js';

/** Audits one data node at host:port (connection, facts, checks; unreachable is a failed check). */
export type AuditNodeAt = (host: string, port: number, role: NodeRole) => Promise<NodeReport>;

/** Flat `[field, value, ...]` replies of SENTINEL → a map. */
function fields(reply: unknown): Map<string, string> {
  const out = new Map<string, string>();
  if (!Array.isArray(reply)) return out;
  for (let i = 0; i + 1 < reply.length; i += 2) out.set(String(reply[i]), String(reply[i + 1]));
  return out;
}

function errorText(err: unknown): string {
  const e = err as Error & { code?: string };
  return sentinelReason(e.code && !/^ERR|^NOAUTH|^WRONGPASS/.test(e.message) ? e.code : e.message);
}

/** A direct, non-retrying connection to one sentinel (its own credentials, the URL's TLS). */
function sentinelClient(settings: ClientSettings, s: SentinelAddress): Redis {
  const parsed = parseUrl(settings.url);
  const tls = parsed.tls ? redisOptionsFromUrl(parsed, undefined, settings.tlsCa ?? process.env.GLIDEMQ_TLS_CA).tls : undefined;
  const { sentinelUsername, sentinelPassword } = sentinelCredentials(settings.options);
  const options: RedisOptions = {
    host: s.host,
    port: s.port,
    username: sentinelUsername,
    password: sentinelPassword,
    tls,
    lazyConnect: true,
    connectTimeout: settings.options?.connectTimeout ?? 3000,
    commandTimeout: 3000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
    enableReadyCheck: false,
  };
  return new Redis(options);
}

export async function gatherSentinelFacts(settings: ClientSettings, target: SentinelTarget, s: SentinelAddress): Promise<SentinelFacts> {
  const address = formatSentinel(s);
  const facts: SentinelFacts = { address, name: target.name };
  const client = sentinelClient(settings, s);
  let socketError: (Error & { code?: string }) | undefined;
  client.on('error', (err: Error) => {
    socketError ??= err;
  });
  try {
    try {
      await client.connect();
      await client.call('PING');
    } catch (err) {
      facts.unreachable = errorText(socketError ?? err);
      return facts;
    }
    try {
      facts.master = fields(await client.call('SENTINEL', 'MASTER', target.name));
    } catch (err) {
      facts.masterError = errorText(err);
      return facts;
    }
    try {
      facts.quorum = { ok: true, text: String(await client.call('SENTINEL', 'CKQUORUM', target.name)) };
    } catch (err) {
      facts.quorum = { ok: false, text: errorText(err) };
    }
    try {
      const list = (await client.call('SENTINEL', 'REPLICAS', target.name)) as unknown[];
      facts.replicas = list.map(fields);
    } catch (err) {
      facts.replicasError = errorText(err);
    }
    return facts;
  } finally {
    client.disconnect();
  }
}

/** `ip:port` of the master as a sentinel reports it. */
export function masterAddress(f: SentinelFacts): string | undefined {
  const ip = f.master?.get('ip');
  const port = f.master?.get('port');
  return ip && port ? formatAddress(ip, Number(port)) : undefined;
}

/** The address most sentinels name (ties: the first sentinel's), or undefined when none knows the master. */
export function agreedPrimary(all: SentinelFacts[]): { host: string; port: number; address: string } | undefined {
  const votes = new Map<string, { host: string; port: number; n: number }>();
  for (const f of all) {
    const address = masterAddress(f);
    if (!address) continue;
    const v = votes.get(address) ?? { host: f.master!.get('ip')!, port: Number(f.master!.get('port')), n: 0 };
    v.n += 1;
    votes.set(address, v);
  }
  let best: [string, { host: string; port: number; n: number }] | undefined;
  for (const entry of votes) if (!best || entry[1].n > best[1].n) best = entry;
  return best && { host: best[1].host, port: best[1].port, address: best[0] };
}

/**
 * Every node of the set: the primary the sentinels agree on, each replica any of them lists, then
 * the sentinels. Nothing to audit (no sentinel answers, or none knows the master name) is an error
 * the CLI reports with exit 2, naming the sentinels and the name.
 */
export async function auditSentinelSet(settings: ClientSettings, target: SentinelTarget, auditNodeAt: AuditNodeAt): Promise<NodeReport[]> {
  const all = await Promise.all(target.sentinels.map((s) => gatherSentinelFacts(settings, target, s)));
  const primary = agreedPrimary(all);
  if (!primary) {
    // the same words as a client that finds no primary (engine/connecting/sentinel.ts)
    const said = new Map(all.map((f) => [f.address, f.unreachable ?? f.masterError ?? 'no answer']));
    throw new ConnectionError('ERR_SENTINEL', describeSentinelFailure(target, said));
  }
  const replicas = new Map<string, { host: string; port: number }>();
  for (const f of all) {
    for (const r of f.replicas ?? []) {
      const ip = r.get('ip');
      const port = Number(r.get('port'));
      if (ip && port) replicas.set(formatAddress(ip, port), { host: ip, port });
    }
  }
  replicas.delete(primary.address);
  const dataNodes = await Promise.all([
    auditNodeAt(primary.host, primary.port, 'master'),
    ...[...replicas.values()].sort((a, b) => a.port - b.port).map((r) => auditNodeAt(r.host, r.port, 'replica')),
  ]);
  const sentinels: NodeReport[] = all.map((f) => ({ address: f.address, role: 'sentinel', checks: sentinelChecks(f, primary.address, all.length) }));
  return [...dataNodes, ...sentinels];
}
