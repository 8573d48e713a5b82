/**
 * Which FUNCTION subcommands that change the library an ACL user may run, read from its `ACL LIST`
 * line. The server's own evaluation is the truth; this follows the rules that grant or take those
 * subcommands (categories, the command, the subcommand, resets) and ignores the rest, which is
 * enough to tell an administrator from an application user.
 */

/** The subcommands that replace, delete, flush or restore function libraries. */
export const LIBRARY_CHANGING = ['load', 'delete', 'flush', 'restore'] as const;
export type LibraryChange = (typeof LIBRARY_CHANGING)[number];

/** The ACL categories those four subcommands belong to (the same for all four on Valkey 7-8 and Redis 7). */
const THEIR_CATEGORIES = new Set(['all', 'write', 'slow', 'scripting']);

export interface AclUser {
  name: string;
  /** The user can log in (`on`); a user that is `off` cannot authenticate at all. */
  enabled: boolean;
  /** The library-changing subcommands any of its selectors allows. */
  may: LibraryChange[];
}

/** `user <name> <rules...>` lines → users; selectors `( ... )` add permissions, so their grants count too. */
export function parseAclList(lines: string[]): AclUser[] {
  const users: AclUser[] = [];
  for (const line of lines) {
    const [kind, name, ...rest] = line.trim().split(/\s+/);
    if (kind !== 'user' || !name) continue;
    const { root, selectors } = splitSelectors(rest);
    const may = new Set<LibraryChange>();
    for (const rules of [root, ...selectors]) for (const c of allowed(rules)) may.add(c);
    const enabled = root.lastIndexOf('on') > root.lastIndexOf('off'); // the later flag wins
    users.push({ name, enabled, may: LIBRARY_CHANGING.filter((c) => may.has(c)) });
  }
  return users;
}

function splitSelectors(tokens: string[]): { root: string[]; selectors: string[][] } {
  const root: string[] = [];
  const selectors: string[][] = [];
  let current: string[] | undefined;
  for (const raw of tokens) {
    let t = raw;
    if (t.startsWith('(')) {
      current = [];
      selectors.push(current);
      t = t.slice(1);
    }
    const closes = t.endsWith(')');
    if (closes) t = t.slice(0, -1);
    if (t) (current ?? root).push(t);
    if (closes) current = undefined;
  }
  return { root, selectors };
}

/** Applies one rule list from the left, as the server does, to the four subcommands only. */
function allowed(rules: string[]): Set<LibraryChange> {
  const may = new Set<LibraryChange>();
  const set = (grant: boolean, which: readonly LibraryChange[]) => {
    for (const c of which) {
      if (grant) may.add(c);
      else may.delete(c);
    }
  };
  for (const raw of rules) {
    const rule = raw.toLowerCase();
    if (rule === 'allcommands') set(true, LIBRARY_CHANGING);
    else if (rule === 'nocommands' || rule === 'reset') set(false, LIBRARY_CHANGING);
    else {
      const m = /^([+-])(@?)([a-z_]+)(?:\|([a-z_]+))?$/.exec(rule);
      if (!m) continue;
      const [, sign, category, name, sub] = m;
      const grant = sign === '+';
      if (category) {
        if (THEIR_CATEGORIES.has(name)) set(grant, LIBRARY_CHANGING);
      } else if (name === 'function') {
        if (sub === undefined) set(grant, LIBRARY_CHANGING);
        else if ((LIBRARY_CHANGING as readonly string[]).includes(sub)) set(grant, [sub as LibraryChange]);
      }
    }
  }
  return may;
}
