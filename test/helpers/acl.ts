/**
 * The ACL rules the README documents for glidemq's users ("ACL roles"), read from the README itself
 * so the tests prove the documented lines and the docs cannot drift from what was tested.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { REPO_ROOT } from './fixtures.js';

export const ROLES = ['admin', 'producer', 'worker', 'operator', 'monitor'] as const;
export type Role = (typeof ROLES)[number];

/** The rules after `ACL SETUSER glidemq-<role> on >PASSWORD` under README.md's "### ACL roles". */
export function documentedRoleRules(role: Role): string[] {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  const at = readme.indexOf('### ACL roles');
  if (at < 0) throw new Error('README.md: no "### ACL roles" section');
  const end = readme.indexOf('\n## ', at);
  const section = readme.slice(at, end < 0 ? undefined : end);
  const m = new RegExp(`^valkey-cli ACL SETUSER glidemq-${role} on >\\S+ (.+)$`, 'm').exec(section);
  if (!m) throw new Error(`README.md: no "ACL SETUSER glidemq-${role} on >..." line under ### ACL roles`);
  return m[1].trim().split(/\s+/);
}

/** What the README says every role adds on a cluster ("On a cluster, every role also needs `...`"). */
export function documentedClusterRules(): string[] {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  const m = /On a\s+cluster, every role also needs `([^`]+)`/.exec(readme.slice(readme.indexOf('### ACL roles')));
  if (!m) throw new Error('README.md: no "On a cluster, every role also needs `...`" under ### ACL roles');
  return m[1].trim().split(/\s+/);
}

/**
 * The worker's rules: the role that both adds and processes jobs and runs the CLI's inspecting
 * commands, which the older security tests exercise as one application user.
 */
export function documentedAclRules(): string[] {
  return documentedRoleRules('worker');
}

/** Creates (or resets) `name` with the role's documented rules and a password. */
export async function createRoleUser(admin: Redis, role: Role, name: string, password: string): Promise<void> {
  await admin.call('ACL', 'SETUSER', name, 'reset', 'on', `>${password}`, ...documentedRoleRules(role));
}

/** True when the server refused the command for lack of permission (not for any other reason). */
export function isNoPerm(err: unknown): boolean {
  return /NOPERM|no permissions/i.test(String(err));
}

/** Commands whose ACL rule may name a subcommand (or, for INFO, a first argument). */
const WITH_SUBCOMMAND = new Set(['xgroup', 'xinfo', 'info', 'client', 'object', 'function']);

/**
 * Every command the function library runs, read from lua/*.lua: a name in `commandNames` (the
 * server's COMMAND LIST) as the first string of a call, of a table built as one (`{ 'XGROUP',
 * ... }`) or after callUnless's error code; with its subcommand or first argument where a rule
 * may name one ("xgroup|create", "info|replication").
 */
export function libraryCommands(commandNames: readonly string[]): string[] {
  const known = new Set(commandNames.map((c) => c.toLowerCase()));
  const dir = join(REPO_ROOT, 'lua');
  const found = new Set<string>();
  for (const f of readdirSync(dir).filter((n) => n.endsWith('.lua'))) {
    const src = readFileSync(join(dir, f), 'utf8');
    const re = /(?:\(\s*|\{\s*|callUnless\('[A-Z]+',\s*)'([A-Za-z]+)'(?:,\s*'([A-Za-z]+)')?/g;
    for (let m = re.exec(src); m; m = re.exec(src)) {
      const cmd = m[1].toLowerCase();
      if (m[1] !== m[1].toUpperCase() || !known.has(cmd)) continue;
      found.add(WITH_SUBCOMMAND.has(cmd) && m[2] ? `${cmd}|${m[2].toLowerCase()}` : cmd);
    }
  }
  return [...found].sort();
}

/** Whether `rules` (a role's ACL rules) allow `command` ("cmd" or "cmd|sub"), by name. */
export function rulesAllow(rules: readonly string[], command: string): boolean {
  const [cmd] = command.split('|');
  return rules.includes(`+${command}`) || rules.includes(`+${cmd}`);
}
