/**
 * Exposure: a server without a password that accepts remote clients lets anyone on the network
 * read or delete every job. Looks at the password, protected-mode and the bind addresses.
 * Library control: an ACL user that may FUNCTION LOAD can replace the code every glidemq client
 * runs with its own rights; one that may delete or flush functions can stop every queue.
 */
import type { Check, CheckModule, NodeFacts } from '../types.js';
import { parseAclList } from './acl-rules.js';
import { setting, unknownCheck } from './util.js';

const ALL_INTERFACES = new Set(['*', '0.0.0.0', '::', '::*']);

function isLoopback(addr: string): boolean {
  return addr === 'localhost' || addr === '::1' || addr.startsWith('127.');
}

/** bind entries; a leading '-' marks an address that may be missing, which still counts. */
function bindAddresses(value: string): string[] {
  return value.trim().split(/\s+/).filter(Boolean).map((a) => a.replace(/^-/, ''));
}

function exposure(facts: NodeFacts): Check {
  const id = 'network-exposure';
  const expected = 'a password, or loopback-only with protected-mode yes';
  const bind = setting(facts, 'bind');
  const protectedMode = setting(facts, 'protected-mode');
  const passwordless = facts.passwordless;
  if (bind === undefined || protectedMode === undefined || passwordless === undefined) {
    return unknownCheck(facts, id, expected, 'bind, protected-mode or the password could not be read');
  }
  const addrs = bindAddresses(bind);
  const everywhere = addrs.length === 0 || addrs.some((a) => ALL_INTERFACES.has(a));
  const loopbackOnly = !everywhere && addrs.every(isLoopback);
  const actual = `bind=${addrs.length ? addrs.join(' ') : '(all)'} protected-mode=${protectedMode} password=${passwordless ? 'none' : 'set'}`;
  if (passwordless && protectedMode !== 'yes' && !loopbackOnly) {
    return {
      id,
      status: 'fail',
      actual,
      expected,
      message: 'no password, protected mode off and reachable beyond loopback: anyone on the network can read or delete every job; set requirepass (or ACL users) and bind only the interfaces clients use',
    };
  }
  if (passwordless && !loopbackOnly) {
    return {
      id,
      status: 'warn',
      actual,
      expected,
      message: 'listening beyond loopback with no password: only protected mode keeps remote clients out; set requirepass or ACL users before relying on it',
    };
  }
  if (everywhere) {
    return {
      id,
      status: 'warn',
      actual,
      expected,
      message: 'listening on every interface: bind only the addresses your application uses and firewall the port',
    };
  }
  return {
    id,
    status: 'pass',
    actual,
    expected,
    message: loopbackOnly ? 'reachable from this host only' : 'password required and bound to chosen interfaces',
  };
}

/**
 * ACL users other than `default` (the server's own administrator) that may change the library.
 * Users that are `off` cannot log in and are left out. Not gathered (a synthetic fact set): no check.
 */
function libraryControl(facts: NodeFacts): Check | undefined {
  const id = 'acl-function-users';
  const expected = 'no user but default may FUNCTION LOAD/DELETE/FLUSH/RESTORE';
  if (!facts.acl) return undefined;
  if (!facts.acl.lines) {
    return {
      id,
      status: 'unknown',
      actual: 'unknown',
      expected,
      message: `ACL LIST could not be read (${facts.acl.error ?? 'no answer'}); run the audit as the default user (or one with acl|list) to see which users may change the glidemq library`,
    };
  }
  const holders = parseAclList(facts.acl.lines).filter((u) => u.name !== 'default' && u.enabled && u.may.length > 0);
  if (holders.length === 0) {
    return { id, status: 'pass', actual: 'none', expected, message: 'only the default user may load, delete, flush or restore function libraries' };
  }
  return {
    id,
    status: 'warn',
    actual: holders.map((u) => `${u.name} (${u.may.join(', ')})`).join('; '),
    expected,
    message:
      'these users can replace the glidemq library (its functions run with the rights of every client that calls them; clients ' +
      'refuse a library whose code is not theirs, which stops the queues) or delete or flush it: give producers, workers and ' +
      'operators -@scripting +fcall +fcall_ro +function|list (README "ACL roles"), and keep an administrator user off ' +
      '(ACL SETUSER <name> off) except while it runs `glidemq library install`',
  };
}

export const securityChecks: CheckModule = (facts) => {
  const control = libraryControl(facts);
  return control ? [exposure(facts), control] : [exposure(facts)];
};
