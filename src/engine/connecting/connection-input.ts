/**
 * What a caller may give as a connection (a URL, ioredis options, `{ url, ... }`, or a client), made
 * into settings glidemq can build more clients from; anything else is refused with what was expected.
 */
import type { RedisOptions } from 'ioredis';
import { CLIENT_METHODS, isClient, missingClientMembers, type Client, type ForeignClient } from './client-shape.js';
import { InvalidArgumentError } from '../shared/errors.js';
import { sentinelUrlFromOptions } from './sentinel.js';
import { DEFAULT_URL, redactUrl } from './server-url.js';

export type ConnectionInput =
  | string
  | URL
  | RedisOptions
  | Client
  | ForeignClient
  | { url: string; cluster?: boolean; password?: string; tlsCa?: string; options?: RedisOptions };

export interface ClientSettings {
  url: string;
  cluster: boolean;
  password?: string;
  /**
   * PEM file of the certificate authority a `rediss://` server's certificate is checked against
   * (default `$GLIDEMQ_TLS_CA`; without one, the system's trusted authorities).
   */
  tlsCa?: string;
  /** Extra ioredis options (tests use these for retry behaviour). */
  options?: RedisOptions;
}

/**
 * The ioredis option names (versions 5 and 6, with the socket options they pass to `net`/`tls`) by
 * which a plain object is recognised as connection options.
 */
const OPTION_KEYS = new Set([
  // where and how to connect
  'host', 'port', 'path', 'family', 'tls', 'username', 'password', 'db', 'name', 'role', 'keyPrefix',
  'sentinels', 'sentinelUsername', 'sentinelPassword', 'sentinelTLS', 'sentinelRetryStrategy',
  'sentinelReconnectStrategy', 'sentinelCommandTimeout', 'sentinelMaxConnections', 'enableTLSForSentinelMode',
  'preferredSlaves', 'natMap', 'updateSentinels', 'failoverDetector', 'Connector', 'localAddress', 'localPort',
  // behaviour
  'connectTimeout', 'disconnectTimeout', 'commandTimeout', 'socketTimeout', 'blockingTimeout', 'blockingTimeoutGrace',
  'keepAlive', 'noDelay', 'connectionName', 'disableClientInfo', 'clientInfoTag', 'retryStrategy', 'reconnectOnError',
  'maxRetriesPerRequest', 'maxLoadingRetryTime', 'enableOfflineQueue', 'enableReadyCheck', 'autoResubscribe',
  'autoResendUnfulfilledCommands', 'lazyConnect', 'readOnly', 'stringNumbers', 'protocol', 'replyMapping', 'monitor',
  'enableAutoPipelining', 'autoPipeliningIgnoredCommands', 'offlineQueue', 'commandQueue', 'scripts',
  'showFriendlyErrorStack', 'himportFieldsets',
]);

/** The keys of glidemq's own `{ url, ... }` form (ClientSettings). */
const SETTINGS_KEYS = new Set(['url', 'cluster', 'password', 'tlsCa', 'options']);

/** A plain `{ ... }` object (of this or another realm), not an instance of some class. */
function isPlainObject(x: object): boolean {
  const proto = Object.getPrototypeOf(x) as object | null;
  return proto === null || Object.getPrototypeOf(proto) === null;
}

function describeValue(x: unknown): string {
  if (x === null) return 'null';
  if (Array.isArray(x)) return 'an array';
  if (typeof x !== 'object') return `a ${typeof x}`;
  const ctor = (Object.getPrototypeOf(x) as { constructor?: { name?: unknown } } | null)?.constructor?.name;
  return typeof ctor === 'string' && ctor !== '' && ctor !== 'Object' ? `a ${ctor} instance` : 'an object';
}

const EXPECTED =
  'expected a URL string, ioredis options ({ host, port, ... }), { url, cluster?, password?, tlsCa?, options? } or an ioredis client (version 5 or 6)';

function refused(what: string): InvalidArgumentError {
  return new InvalidArgumentError('ERR_CONNECTION_INPUT', `connection: ${what}; ${EXPECTED}`, true);
}

/**
 * Normalises any accepted connection input into settings that can make more clients. Something that
 * is none of the accepted forms is refused, never read as "no options": connecting to the default
 * address instead of the server the caller meant would hang, or write to whatever runs there.
 */
export function settingsFrom(input: ConnectionInput | undefined): ClientSettings | Client {
  if (input === undefined) return { url: process.env.GLIDEMQ_URL ?? DEFAULT_URL, cluster: false, password: process.env.GLIDEMQ_PASSWORD };
  if (typeof input === 'string') return { url: input, cluster: false, password: process.env.GLIDEMQ_PASSWORD };
  const given: unknown = input;
  if (given instanceof URL) return { url: given.href, cluster: false, password: process.env.GLIDEMQ_PASSWORD };
  if (typeof given !== 'object' || given === null || Array.isArray(given)) throw refused(`got ${describeValue(given)}`);
  if (isClient(given)) return given;
  if (!isPlainObject(given)) {
    const missing = missingClientMembers(given);
    const partly = missing.length < CLIENT_METHODS.length + 2;
    throw refused(
      partly
        ? `got ${describeValue(given)} that is not an ioredis client (it has no ${missing.join(', ')})`
        : `got ${describeValue(given)}`,
    );
  }
  const keys = Object.keys(given);
  if ('url' in given) {
    const unknown = keys.filter((k) => !SETTINGS_KEYS.has(k));
    if (typeof (given as { url?: unknown }).url !== 'string') throw refused('"url" is not a string');
    if (unknown.length > 0) throw refused(`unknown ${unknown.length === 1 ? 'key' : 'keys'} ${unknown.map((k) => `"${k}"`).join(', ')} beside "url"`);
    const withUrl = given as { url: string; cluster?: boolean; password?: string; tlsCa?: string; options?: RedisOptions };
    return {
      url: withUrl.url,
      cluster: !!withUrl.cluster,
      password: withUrl.password ?? process.env.GLIDEMQ_PASSWORD,
      tlsCa: withUrl.tlsCa,
      options: withUrl.options,
    };
  }
  // An empty object is "no options" (ioredis's own defaults, as `new Redis({})`); anything else must
  // name at least one ioredis option, so `{ foo: 1 }` or a wrapper object is not taken for one.
  if (keys.length > 0 && !keys.some((k) => OPTION_KEYS.has(k))) {
    throw refused(`got an object with no ioredis option (${keys.slice(0, 5).map((k) => `"${k}"`).join(', ')}${keys.length > 5 ? ', ...' : ''})`);
  }
  const o = given as RedisOptions;
  const scheme = o.tls ? 'rediss' : 'redis';
  return {
    // options naming sentinels are described (and duplicated) by the Sentinel URL of the same set
    url: sentinelUrlFromOptions(o) ?? `${scheme}://${o.host ?? '127.0.0.1'}:${o.port ?? 6379}/${o.db ?? 0}`,
    cluster: false,
    password: o.password,
    options: o,
  };
}

/** Describes where a client points, without any password. */
export function describeSettings(s: ClientSettings): string {
  return redactUrl(s.url);
}
