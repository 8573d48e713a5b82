/**
 * Server URLs: parsing (redis/rediss/valkey/valkeys, and their +sentinel forms), password redaction,
 * and the ioredis options a URL stands for (database, credentials, TLS).
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import type { RedisOptions } from 'ioredis';
import { invalid } from '../shared/errors.js';
import { isSentinelUrl, splitSentinelUrl, type SentinelTarget } from './sentinel.js';

export interface ParsedUrl {
  /** The URL rewritten to a redis scheme (ioredis reads the db number only for those); a Sentinel URL as given. */
  url: string;
  /** The server; for a Sentinel URL, the first sentinel (the primary is known only once they are asked). */
  host: string;
  port: number;
  tls: boolean;
  username?: string;
  password?: string;
  db: number;
  /** A `redis+sentinel://` URL: the sentinels to ask, and the master name they monitor. */
  sentinel?: SentinelTarget;
}

export const DEFAULT_URL = 'redis://127.0.0.1:6379';

export function parseUrl(raw: string): ParsedUrl {
  if (isSentinelUrl(raw)) {
    // The hosts and the master name come out first; credentials and database follow the plain rules.
    const { plain, target } = splitSentinelUrl(raw, redactUrl(raw));
    const parsed = parseServerUrl(plain, raw);
    return { ...parsed, url: raw, host: target.sentinels[0].host, port: target.sentinels[0].port, sentinel: target };
  }
  return parseServerUrl(raw, raw);
}

/** `text` is the URL to parse, `raw` the one the caller gave (what messages show, redacted). */
function parseServerUrl(text: string, raw: string): ParsedUrl {
  const rewritten = text.replace(/^valkey(s?):\/\//i, (_m, s: string) => `redis${s}://`);
  let u: URL;
  try {
    u = new URL(rewritten);
  } catch {
    throw invalid(`invalid server URL "${redactUrl(raw)}": expected redis://[user:password@]host:port[/db]${raw.includes('@') ? ENCODE_HINT : ''}`);
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') {
    throw invalid(
      `unsupported URL scheme "${u.protocol}" in ${redactUrl(raw)}: use redis://, rediss://, valkey:// or valkeys:// (or redis+sentinel://host:26379,.../<master name>)`,
    );
  }
  // An "@" past the host is a password that held "/", "?" or "#" unencoded: the parse took part of it
  // for the host and port. Connecting there would send the rest of the password nowhere useful.
  if (`${u.pathname}${u.search}${u.hash}`.includes('@')) {
    throw invalid(`invalid server URL "${redactUrl(raw)}": an "@" after a "/", "?" or "#"${ENCODE_HINT}`);
  }
  if (u.hostname === '') throw invalid(`invalid server URL "${redactUrl(raw)}": no host (expected redis://[user:password@]host:port[/db])`);
  const dbText = u.pathname.replace(/^\//, '');
  const db = dbText === '' ? 0 : Number(dbText);
  if (!Number.isInteger(db) || db < 0) throw invalid(`invalid database number "${dbText}" in ${redactUrl(raw)}`);
  const port = u.port === '' ? 6379 : Number(u.port);
  return {
    url: rewritten,
    host: u.hostname.replace(/^\[|\]$/g, ''),
    port,
    tls: u.protocol === 'rediss:',
    username: u.username ? decodeCredential(u.username, raw) : undefined,
    password: u.password ? decodeCredential(u.password, raw) : undefined,
    db,
  };
}

const ENCODE_HINT = '; in a user name or password write "/" as %2F, "?" as %3F, "#" as %23 and "%" as %25';

function decodeCredential(text: string, raw: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw invalid(`invalid server URL "${redactUrl(raw)}": a "%" in the user name or password is not followed by two hex digits${ENCODE_HINT}`);
  }
}

/**
 * `redis://user:secret@h:1` → `redis://user:***@h:1`; never let a password reach output.
 *
 * The URL parser the connection uses (WHATWG `URL`) takes the credentials to be everything before
 * the last "@" of the authority, the user name ending at the first ":" — so `redis://u:p@ss@h`
 * authenticates as `u` with `p@ss`. Redaction cuts at the same places, and goes further when the
 * parse would not find the credentials: everything up to the last "@" anywhere in the text is hidden
 * (a password with an unencoded "/", "?" or "#" ends the authority early, and the URL is then
 * refused with a message that must not show it), and a text that does not parse at all is treated
 * the same way. Only the user name (the text before the first ":") is kept.
 */
export function redactUrl(raw: string): string {
  const head = /^[a-z][a-z0-9+.-]*:\/{0,2}/i.exec(raw)?.[0] ?? '';
  const rest = raw.slice(head.length);
  const at = rest.lastIndexOf('@');
  if (at < 0) return raw;
  const userinfo = rest.slice(0, at);
  const colon = userinfo.indexOf(':');
  const shown = colon < 0 ? '***' : `${userinfo.slice(0, colon)}:***`;
  return `${head}${shown}@${rest.slice(at + 1)}`;
}

export function redisOptionsFromUrl(parsed: ParsedUrl, password?: string, tlsCa = process.env.GLIDEMQ_TLS_CA): RedisOptions {
  const opts: RedisOptions = {
    host: parsed.host,
    port: parsed.port,
    db: parsed.db,
    username: parsed.username,
    password: parsed.password ?? password,
  };
  if (parsed.tls) {
    opts.tls = {
      // SNI takes host names only; an IP address is checked against the certificate's IP entries.
      // Through Sentinel the server is known only once asked for: each host is checked by its address.
      ...(isIP(parsed.host) || parsed.sentinel ? {} : { servername: parsed.host }),
      rejectUnauthorized: process.env.GLIDEMQ_TLS_INSECURE !== '1',
      ...(tlsCa ? { ca: [readCa(tlsCa)] } : {}),
    };
  }
  return opts;
}

function readCa(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw invalid(`cannot read the TLS certificate authority file "${path}" (--tls-ca or $GLIDEMQ_TLS_CA): ${code}`);
  }
}

