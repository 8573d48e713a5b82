/**
 * The auditor's vocabulary: what one node looks like from the outside (facts), what one check
 * concludes about it, and the report that the CLI prints or serialises.
 */
export type CheckStatus = 'pass' | 'warn' | 'fail' | 'unknown';

export interface Check {
  id: string;
  status: CheckStatus;
  /** What the node has, as text (never a secret). */
  actual: string;
  /** What the durable baseline wants. */
  expected: string;
  /** One line: what to set and why. */
  message: string;
}

export type NodeRole = 'master' | 'replica';

export interface NodeReport {
  address: string;
  /** A data node's role, or `sentinel` for a sentinel's view of the set (audit over Sentinel). */
  role: NodeRole | 'sentinel';
  checks: Check[];
}

export interface AuditSummary {
  pass: number;
  warn: number;
  fail: number;
  unknown: number;
}

export interface AuditReport {
  nodes: NodeReport[];
  summary: AuditSummary;
}

/** A replica as its primary's INFO replication lists it. */
export interface ReplicaLink {
  address: string;
  state: string;
  lagSeconds: number | undefined;
}

export interface LibraryFacts {
  state: 'present' | 'missing' | 'unknown';
  /** The library's source hash as its glidemq_version declares it (read from its code, never run). */
  version?: string;
  /** The glidemq package version that built the loaded library, as its code declares it. */
  packageVersion?: string;
  /** sha256 of the loaded library's code, to tell this build's library from one with a copied version. */
  codeSha256?: string;
  /** Why the state or version could not be read. */
  error?: string;
}

/** Everything the checks read about one node, gathered once. */
export interface NodeFacts {
  address: string;
  role: NodeRole;
  /** The node is part of a cluster audit (a primary without a replica matters there). */
  inCluster: boolean;
  /** CONFIG GET results; a name absent from the map could not be read. */
  config: Map<string, string>;
  /** Why CONFIG GET could not be used at all (renamed, disabled, refused by ACL), if so. */
  configRefused?: string;
  /** INFO fields, flattened across sections. */
  info: Map<string, string>;
  replicas: ReplicaLink[];
  library: LibraryFacts;
  /** True/false when known: the default user can run commands without a password. */
  passwordless?: boolean;
  /** The node's ACL users; absent when not gathered. */
  acl?: AclFacts;
  /** The node has WAITAOF (confirmed writes with fsync); undefined when it could not be asked. */
  waitaof?: boolean;
}

/** `ACL LIST` as the node answered it, or why it could not be read (it needs acl|list). */
export interface AclFacts {
  /** One `user <name> <rules...>` line per user. */
  lines?: string[];
  error?: string;
}

export interface AuditOptions {
  /** The library version this build loads, to compare with what each node has. */
  expectedLibraryVersion?: string;
  /** This build's package version: a node holding a library from a newer glidemq is not replaced. */
  packageVersion?: string;
}

export type CheckModule = (facts: NodeFacts, options: AuditOptions) => Check[];
