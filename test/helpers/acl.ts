/**
 * The ACL rules the README documents for a glidemq user, read from the README itself so the
 * tests prove the documented line and the docs cannot drift from what was tested.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './fixtures.js';

/** The rules after `ACL SETUSER <user> on >PASSWORD` in README.md's Security section. */
export function documentedAclRules(): string[] {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Security'));
  const m = /ACL SETUSER glidemq on >\S+ (.+)$/m.exec(section);
  if (!m) throw new Error('README.md: no "ACL SETUSER glidemq on >..." line under ## Security');
  return m[1].trim().split(/\s+/);
}
