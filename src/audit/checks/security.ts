/**
 * Exposure: a server without a password that accepts remote clients lets anyone on the network
 * read or delete every job. Looks at the password, protected-mode and the bind addresses.
 */
import type { Check, CheckModule, NodeFacts } from '../types.js';
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

export const securityChecks: CheckModule = (facts) => [exposure(facts)];
