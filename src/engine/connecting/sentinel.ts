/**
 * Valkey Sentinel addresses: `redis+sentinel://[user:password@]host:26379[,host:26379...]/<master>[/db]`
 * (also `valkey+sentinel`, and `rediss+sentinel` / `valkeys+sentinel` for TLS). The sentinels are
 * asked where the named primary is; the credentials and the database are the primary's (and its
 * replicas'). A sentinel that wants a password of its own gets it from `$GLIDEMQ_SENTINEL_PASSWORD`
 * (or the ioredis option `sentinelPassword`), never from the URL: a sentinel without one refuses
 * AUTH, and a URL password meant for the data nodes would then stop every connection.
 */
import type { RedisOptions } from 'ioredis';
import { invalid } from '../shared/errors.js';

export interface SentinelAddress {
  host: string;
  port: number;
}

export interface SentinelTarget {
  sentinels: SentinelAddress[];
  /** The master name the sentinels monitor (`sentinel monitor <name> ...`). */
  name: string;
}

export const DEFAULT_SENTINEL_PORT = 26379;

const SCHEME = /^(redis|valkey)(s?)\+sentinel:\/\//i;
const FORM = 'redis+sentinel://[user:password@]host:26379[,host:26379...]/<master name>[/db]';

export function isSentinelUrl(raw: string): boolean {
  return SCHEME.test(raw);
}

export interface SplitSentinelUrl {
  /** A plain `redis[s]://` URL with the same credentials, database and query (and a placeholder host). */
  plain: string;
  target: SentinelTarget;
}

/**
 * Takes the host list and the master name out of a sentinel URL; what is left is an ordinary URL
 * the caller parses as any other (credentials, database), so both forms follow one set of rules.
 * `shown` is the URL with its password hidden, for messages.
 */
export function splitSentinelUrl(raw: string, shown: string): SplitSentinelUrl {
  const m = SCHEME.exec(raw);
  if (!m) throw invalid(`not a Sentinel URL: ${shown}`);
  const rest = raw.slice(m[0].length);
  const end = rest.search(/[/?#]/);
  const authority = end < 0 ? rest : rest.slice(0, end);
  const tail = end < 0 ? '' : rest.slice(end);
  const at = authority.lastIndexOf('@');
  const userinfo = at < 0 ? '' : authority.slice(0, at + 1);
  const hostList = authority.slice(at + 1);
  if (tail.includes('@')) {
    throw invalid(
      `invalid server URL "${shown}": an "@" after a "/", "?" or "#"; in a user name or password write "/" as %2F, "?" as %3F, "#" as %23 and "%" as %25`,
    );
  }
  const sentinels = hostList.split(',').map((h) => parseHost(h.trim(), shown));
  const path = /^[^?#]*/.exec(tail)![0];
  const query = tail.slice(path.length);
  const segments = path.split('/').slice(1);
  const name = decodeName(segments[0] ?? '', shown);
  if (segments.length > 2) throw invalid(`invalid Sentinel URL "${shown}": expected ${FORM}`);
  const db = segments[1] ?? '';
  return {
    plain: `redis${m[2].toLowerCase()}://${userinfo}sentinel${db === '' ? '' : `/${db}`}${query}`,
    target: { sentinels, name },
  };
}

function parseHost(text: string, shown: string): SentinelAddress {
  if (text === '') throw invalid(`invalid Sentinel URL "${shown}": an empty sentinel address; expected ${FORM}`);
  const v6 = /^\[([^\]]+)\](?::(.*))?$/.exec(text);
  const [host, portText] = v6 ? [v6[1], v6[2]] : text.includes(':') ? [text.slice(0, text.lastIndexOf(':')), text.slice(text.lastIndexOf(':') + 1)] : [text, undefined];
  if (!host || /[\s\[\]]/.test(host)) throw invalid(`invalid Sentinel URL "${shown}": bad sentinel address "${text}"; expected ${FORM}`);
  if (portText === undefined || portText === '') return { host, port: DEFAULT_SENTINEL_PORT };
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port < 1 || port > 65535) {
    throw invalid(`invalid Sentinel URL "${shown}": bad port "${portText}" for sentinel ${host}; expected ${FORM}`);
  }
  return { host, port };
}

function decodeName(segment: string, shown: string): string {
  let name: string;
  try {
    name = decodeURIComponent(segment);
  } catch {
    name = '';
  }
  if (/\s/.test(name)) throw invalid(`invalid Sentinel URL "${shown}": the master name "${name}" holds a space or a line break`);
  if (name === '') {
    throw invalid(`the Sentinel URL "${shown}" names no master: expected ${FORM} (the name the sentinels monitor, as in SENTINEL MASTERS)`);
  }
  return name;
}

export function formatSentinel(s: SentinelAddress): string {
  return s.host.includes(':') ? `[${s.host}]:${s.port}` : `${s.host}:${s.port}`;
}

/** How messages name what a sentinel URL points at: `the primary "mymaster" (sentinels a:26379, b:26379)`. */
export function sentinelLabel(t: SentinelTarget): string {
  return `the primary "${t.name}" (sentinels ${t.sentinels.map(formatSentinel).join(', ')})`;
}

/** `sentinels` option of ioredis → the URL that names the same thing (for messages and duplicates). */
export function sentinelUrlFromOptions(o: RedisOptions): string | undefined {
  const list = (o as { sentinels?: Partial<SentinelAddress>[] | null }).sentinels;
  if (!Array.isArray(list) || list.length === 0 || !o.name) return undefined;
  const hosts = list.map((s) => formatSentinel({ host: s.host ?? '127.0.0.1', port: s.port ?? DEFAULT_SENTINEL_PORT })).join(',');
  const scheme = o.tls && (o as { enableTLSForSentinelMode?: boolean }).enableTLSForSentinelMode ? 'rediss' : 'redis';
  return `${scheme}+sentinel://${hosts}/${encodeURIComponent(o.name)}${o.db ? `/${o.db}` : ''}`;
}

/** Who the sentinels themselves are asked as: `$GLIDEMQ_SENTINEL_USERNAME` / `$GLIDEMQ_SENTINEL_PASSWORD`. */
export function sentinelCredentials(options?: RedisOptions): { sentinelUsername?: string; sentinelPassword?: string } {
  const o = (options ?? {}) as { sentinelUsername?: string; sentinelPassword?: string };
  return {
    sentinelUsername: o.sentinelUsername ?? (process.env.GLIDEMQ_SENTINEL_USERNAME || undefined),
    sentinelPassword: o.sentinelPassword ?? (process.env.GLIDEMQ_SENTINEL_PASSWORD || undefined),
  };
}

/**
 * The ioredis options of a client that finds the primary through the sentinels. Beside ioredis's
 * defaults: the client listens to the sentinels' +switch-master (failoverDetector), so a failover
 * moves it to the new primary at once instead of when its old socket happens to fail; a write that
 * reaches a demoted primary (READONLY: nothing was done) reconnects through the sentinels and is
 * sent again; a sentinel that accepts a connection but never answers is given up on.
 */
export function sentinelClientOptions(t: SentinelTarget, tls: RedisOptions['tls'], options?: RedisOptions): RedisOptions {
  return {
    sentinels: t.sentinels.map((s) => ({ host: s.host, port: s.port })),
    name: t.name,
    role: 'master',
    ...sentinelCredentials(options),
    failoverDetector: true,
    reconnectOnError: (err: Error) => (/^READONLY/.test(err.message) ? 2 : false),
    sentinelCommandTimeout: 3000,
    ...(tls ? { enableTLSForSentinelMode: true, sentinelTLS: tls } : {}),
  };
}

/**
 * One sentence saying why the sentinels gave no primary, from what each one answered
 * (`sentinelError` events of ioredis: a refused connection, or a reply without an address).
 */
export function describeSentinelFailure(t: SentinelTarget, perSentinel: Map<string, string>): string {
  const where = `sentinels ${t.sentinels.map(formatSentinel).join(', ')}`;
  const reasons = [...perSentinel.values()];
  if (reasons.length > 0 && reasons.every((r) => r === UNKNOWN_MASTER)) {
    return `no sentinel knows a master named "${t.name}" (${where}): check the name after the hosts in the URL (SENTINEL MASTERS on a sentinel lists the names)`;
  }
  if (reasons.length === 0 || reasons.every((r) => r === UNREACHABLE || /^E[A-Z]+$/.test(r))) {
    return `cannot reach any sentinel of "${t.name}" (${where}): are they running, and are the hosts and ports in the URL right?`;
  }
  if (reasons.length === t.sentinels.length && reasons.every((r) => r === reasons[0])) {
    return `no sentinel gave the address of the primary "${t.name}" (${where}): ${reasons[0]}`;
  }
  const detail = [...perSentinel.entries()].map(([addr, why]) => `${addr}: ${why}`).join('; ');
  return `no sentinel gave the address of the primary "${t.name}" (${detail})`;
}

export const UNKNOWN_MASTER = 'does not know the master';
export const UNREACHABLE = 'unreachable';

/** ioredis's sentinelError message → `address`, short reason. */
export function parseSentinelError(message: string): [string, string] | undefined {
  const m = /^(?:failed to connect to|connected to) sentinel (\S+?)(?: because (.*)| successfully, but got an invalid reply: .*)$/s.exec(message);
  if (!m) return undefined;
  const why = m[2] === undefined ? UNKNOWN_MASTER : sentinelReason(m[2]);
  return [m[1], why];
}

/** A sentinel's refusal or a connection failure, said shortly (and how to fix it, where known). */
export function sentinelReason(text: string): string {
  // Valkey answers an unknown name with an error; older servers (and ioredis's check) with a null reply
  if (/No such master/i.test(text)) return UNKNOWN_MASTER;
  const code = /\b(ECONNREFUSED|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|ECONNRESET)\b/.exec(text)?.[1];
  if (code) return code;
  // ioredis's sentinel connections do not retry: a refused connection fails the command with this
  if (/Connection is closed/i.test(text)) return UNREACHABLE;
  if (/WRONGPASS|invalid username-password/i.test(text)) return 'wrong sentinel user name or password ($GLIDEMQ_SENTINEL_PASSWORD)';
  if (/NOAUTH/i.test(text)) return 'a sentinel password is required ($GLIDEMQ_SENTINEL_PASSWORD)';
  if (/Command timed out/i.test(text)) return 'no answer';
  return text.replace(/\.$/, '');
}
