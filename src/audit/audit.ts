/**
 * The auditor: find the nodes, gather each one's facts over a direct connection, run every
 * check, and sum up. A node that cannot be reached is itself a failed check; when not even the
 * first node answers, the audit cannot run and throws a ConnectionError.
 */
import type { Redis } from 'ioredis';
import { type ClientSettings, parseUrl } from '../engine/connecting/connection.js';
import { runChecks } from './checks/index.js';
import { clusterNodes, connectNode, formatAddress, isClusterNode, type ClusterNode } from './discovery.js';
import { gatherFacts } from './facts.js';
import { auditSentinelSet } from './sentinel.js';
import type { AuditOptions, AuditReport, AuditSummary, NodeReport } from './types.js';

export * from './types.js';

async function auditClient(client: Redis, address: string, inCluster: boolean, options: AuditOptions): Promise<NodeReport> {
  const facts = await gatherFacts(client, address, inCluster);
  return { address, role: facts.role, checks: runChecks(facts, options) };
}

function unreachable(node: ClusterNode, reason: string): NodeReport {
  const down = node.flags.filter((f) => f === 'fail' || f === 'fail?' || f === 'noaddr');
  return {
    address: formatAddress(node.host, node.port),
    role: node.role,
    checks: [
      {
        id: 'reachable',
        status: 'fail',
        actual: down.length ? `unreachable (cluster flags: ${down.join(',')})` : 'unreachable',
        expected: 'answers',
        message: `${reason}; every node holds part of the queue state, so bring it back or replace it`,
      },
    ],
  };
}

async function auditClusterNode(settings: ClientSettings, node: ClusterNode, options: AuditOptions, inCluster = true): Promise<NodeReport> {
  let client: Redis;
  try {
    client = await connectNode(settings, node.host, node.port);
  } catch (err) {
    return unreachable(node, (err as Error).message);
  }
  try {
    return await auditClient(client, formatAddress(node.host, node.port), inCluster, options);
  } catch (err) {
    return unreachable(node, `audit failed: ${(err as Error).message}`);
  } finally {
    client.disconnect();
  }
}

export function summarize(nodes: NodeReport[]): AuditSummary {
  const summary: AuditSummary = { pass: 0, warn: 0, fail: 0, unknown: 0 };
  for (const node of nodes) for (const check of node.checks) summary[check.status] += 1;
  return summary;
}

/** 1 when anything fails (or, strict, warns); 0 otherwise. Unreachable servers never get here. */
export function exitCodeFor(report: AuditReport, strict = false): 0 | 1 {
  if (report.summary.fail > 0) return 1;
  if (strict && report.summary.warn > 0) return 1;
  return 0;
}

export async function runAudit(settings: ClientSettings, options: AuditOptions = {}): Promise<AuditReport> {
  const parsed = parseUrl(settings.url);
  if (parsed.sentinel) {
    // The sentinels name the primary and its replicas; each is audited as a standalone node would be.
    const nodes = await auditSentinelSet(settings, parsed.sentinel, (host, port, role) =>
      auditClusterNode(settings, { host, port, role, flags: [] }, options, false),
    );
    return { nodes, summary: summarize(nodes) };
  }
  const seed = await connectNode(settings);
  let nodes: NodeReport[];
  try {
    // What the server says wins over --cluster: a standalone server named with --cluster is audited as one.
    const cluster = (await isClusterNode(seed)) ?? settings.cluster;
    if (!cluster) {
      nodes = [await auditClient(seed, formatAddress(parsed.host, parsed.port), false, options)];
    } else {
      const members = await clusterNodes(seed, parsed.host);
      nodes = await Promise.all(members.map((m) => auditClusterNode(settings, m, options)));
      nodes.sort((a, b) => (a.role === b.role ? a.address.localeCompare(b.address) : a.role === 'master' ? -1 : 1));
    }
  } finally {
    seed.disconnect();
  }
  return { nodes, summary: summarize(nodes) };
}
