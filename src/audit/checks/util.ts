/** Small helpers shared by the check modules: reading a setting, and the `unknown` verdict. */
import type { Check, NodeFacts } from '../types.js';

export function setting(facts: NodeFacts, name: string): string | undefined {
  return facts.config.get(name);
}

export function infoField(facts: NodeFacts, name: string): string | undefined {
  return facts.info.get(name);
}

export function infoNumber(facts: NodeFacts, name: string): number | undefined {
  const v = facts.info.get(name);
  if (v === undefined) return undefined;
  const n = Number(v);
  return Number.isFinite(n) ? n : undefined;
}

/** A check whose setting could not be read: never a pass, and say how to find out by hand. */
export function unknownCheck(facts: NodeFacts, id: string, expected: string, why?: string): Check {
  const reason = why ?? (facts.configRefused ? `CONFIG GET is not available here (${facts.configRefused})` : `the server did not report ${id}`);
  return {
    id,
    status: 'unknown',
    actual: 'unknown',
    expected,
    message: `${reason}; confirm ${id} is ${expected} in the server config or the provider's console`,
  };
}

/** AOF on or off: the configured value, else what INFO persistence says is running. */
export function aofEnabled(facts: NodeFacts): boolean | undefined {
  const configured = setting(facts, 'appendonly');
  if (configured !== undefined) return configured === 'yes';
  const running = infoField(facts, 'aof_enabled');
  if (running !== undefined) return running === '1';
  return undefined;
}

/** `save "3600 1 300 100"` → [[3600, 1], [300, 100]]. */
export function saveRules(value: string): [number, number][] {
  const parts = value.trim().split(/\s+/).filter(Boolean).map(Number);
  const rules: [number, number][] = [];
  for (let i = 0; i + 1 < parts.length; i += 2) rules.push([parts[i], parts[i + 1]]);
  return rules;
}

export interface SettingRule {
  /** The setting's name, which is also the check's id. */
  id: string;
  expected: string;
  good: (value: string) => boolean;
  /** Why the value is right (pass) and what to change when it is not (warn). */
  pass: string;
  warn: string;
}

/** A check on one setting that passes or warns: unknown when the setting cannot be read. */
export function settingCheck(facts: NodeFacts, rule: SettingRule): Check {
  const { id, expected } = rule;
  const value = setting(facts, id);
  if (value === undefined) return unknownCheck(facts, id, expected);
  const good = rule.good(value);
  return { id, status: good ? 'pass' : 'warn', actual: value, expected, message: good ? rule.pass : rule.warn };
}
