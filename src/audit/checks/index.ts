/** Every check module, in the order reports list them: persistence first, then memory, health, the rest. */
import type { AuditOptions, Check, CheckModule, NodeFacts } from '../types.js';
import { aofTuningChecks } from './aof-tuning.js';
import { healthChecks } from './health.js';
import { libraryChecks } from './library.js';
import { memoryChecks } from './memory.js';
import { persistenceChecks } from './persistence.js';
import { replicationChecks } from './replication.js';
import { confirmedWriteChecks } from './confirmed-writes.js';
import { securityChecks } from './security.js';

const MODULES: CheckModule[] = [
  persistenceChecks,
  memoryChecks,
  healthChecks,
  aofTuningChecks,
  libraryChecks,
  replicationChecks,
  confirmedWriteChecks,
  securityChecks,
];

export function runChecks(facts: NodeFacts, options: AuditOptions = {}): Check[] {
  return MODULES.flatMap((m) => m(facts, options));
}
