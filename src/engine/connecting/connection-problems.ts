/**
 * Why connections fail, kept so that a command failing with ioredis's generic "Connection is
 * closed" can say what really went wrong: what the sentinels answered, a database the server does
 * not have, and the last socket error of any client glidemq made.
 */
import { connect } from 'node:net';
import type { Redis } from 'ioredis';
import { isCluster, type Client } from './client-shape.js';
import { ConnectionError } from '../shared/errors.js';
import { describeSentinelFailure, parseSentinelError, type SentinelTarget } from './sentinel.js';

/** What each sentinel last said when asked for the primary (ioredis's `sentinelError` events). */
const sentinelAnswers = new WeakMap<Client, { target: SentinelTarget; bySentinel: Map<string, string> }>();

export function watchSentinels(client: Redis, target: SentinelTarget): void {
  const bySentinel = new Map<string, string>();
  sentinelAnswers.set(client, { target, bySentinel });
  client.on('sentinelError', (err: Error) => {
    const said = parseSentinelError(err.message);
    if (said) bySentinel.set(said[0], said[1]);
  });
  // a primary found: what the sentinels said before is history
  client.on('ready', () => bySentinel.clear());
}

/** When `err` says no sentinel gave a primary: the error naming the sentinels, the master and why. */
export function sentinelFailure(client: Client | undefined, err: Error): ConnectionError | undefined {
  const seen = client && sentinelAnswers.get(client);
  if (!seen || !/^All sentinels are unreachable/.test(String((err as Error | undefined)?.message))) return undefined;
  return new ConnectionError('ERR_SENTINEL', describeSentinelFailure(seen.target, seen.bySentinel));
}

/** Clients whose server refused their database number, and the error that says so. */
const refusedDatabases = new WeakMap<Client, ConnectionError>();

/**
 * A server without the URL's database answers SELECT with an error, and ioredis only reports it
 * and goes on in database 0: every command would read and write (and `obliterate` delete) another
 * database than the one named. The SELECT reply arrives during the connection handshake, before
 * any command of the caller is sent, so the client is closed right there: nothing reaches
 * database 0, and every command fails. waitReady(), settleTopology() and lastConnectionProblem()
 * then name the database (refusedDatabases). A reconnect that meets the same answer (a server
 * restarted with fewer databases) ends the client the same way.
 */
export function refuseMissingDatabase(client: Redis, db: number, where: string): void {
  client.on('error', (err: Error) => {
    const refused = databaseRefusal(err, db, where);
    if (!refused) return;
    refusedDatabases.set(client, refused);
    client.disconnect();
  });
}

/** The error naming the database when `err` is the server's answer to SELECT `db`, else undefined. */
export function databaseRefusal(err: Error, db: number, where: string): ConnectionError | undefined {
  const cluster = /SELECT is not allowed in cluster mode/i.test(err.message);
  if (!cluster && !/DB index is out of range|invalid DB index/i.test(err.message)) return undefined;
  const why = cluster
    ? `the server ${where} is a cluster node, which has only database 0 (SELECT ${db}: ${err.message}): drop "/${db}" from the URL`
    : `the server ${where} has no database ${db} (SELECT ${db}: ${err.message}): use a database number the server has ` +
      '(below its "databases" setting, 16 by default), or none for database 0';
  return new ConnectionError('ERR_DATABASE', why);
}

/** The database refusal behind the last connection failure, if that was one (a CLI names it instead of "cannot reach"). */
export function lastDatabaseRefusal(): ConnectionError | undefined {
  return lastSocketError instanceof ConnectionError && lastSocketError.code === 'ERR_DATABASE' ? lastSocketError : undefined;
}

/** The error naming the database when this client's server refused the URL's database number. */
export function refusedDatabaseOf(client: Client): ConnectionError | undefined {
  return refusedDatabases.get(client);
}

/**
 * Something that is not a Valkey server on the URL's port (a web server, most often) answers with
 * bytes that are no RESP reply, and ioredis reports only "Unknown RESP type 72 "H". Please report
 * this.". The client's error listener names the host and port and what the answer looks like. The
 * error is the very one the failed commands reject with (ioredis flushes them with it and emits it
 * at once, before any of their handlers runs), so the command's caller reads the same sentence.
 */
export function nameForeignServer(client: Redis, where: string): void {
  client.prependListener('error', (err: Error) => {
    const m = /^Unknown RESP type (\d+)/.exec(err?.message ?? '');
    if (!m) return;
    const first = String.fromCharCode(Number(m[1]));
    const looks = first === 'H' ? 'it answered like an HTTP server' : `its answer starts with ${JSON.stringify(first)}, which is no RESP reply`;
    err.message = `${where} is not a Valkey server (${looks}): check the host and port of the URL`;
    // what the socket says next (EPIPE, ECONNRESET: the web server hung up) is not the news
    foreignServers.set(client, err);
  });
}

/**
 * When a connection was cut at once (EPIPE, ECONNRESET), what is at `host:port`: a web server cuts a
 * client whose first bytes are no HTTP, often before its answer could be read. One line is sent
 * ("PING") and the first bytes of the answer are read (within `withinMs`): an answer starting with
 * "HTTP/" gives the sentence nameForeignServer gives; anything else (a Valkey server's +PONG or
 * -NOAUTH, no answer) gives undefined.
 */
export async function probeForeignServer(host: string, port: number, withinMs = 1000): Promise<string | undefined> {
  const answer = await new Promise<string>((resolve) => {
    let got = '';
    const socket = connect({ host, port }, () => socket.write('PING\r\n'));
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(got);
    };
    const timer = setTimeout(done, withinMs);
    socket.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      if (got.length >= 5) done();
    });
    socket.on('error', done);
    socket.on('close', done);
  });
  if (!answer.startsWith('HTTP/')) return undefined;
  return `${host.includes(':') ? `[${host}]` : host}:${port} is not a Valkey server (it answered like an HTTP server): check the host and port of the URL`;
}

/** Clients that found something other than a Valkey server at their address (nameForeignServer). */
const foreignServers = new WeakMap<Client, Error>();

let lastSocketError: Error | undefined;
/** Whether the client that reported lastSocketError connects over TLS. */
let lastSocketErrorTls = false;

/** An 'error' listener of every client glidemq makes (`this` is the client that reports). */
export function rememberSocketError(this: Client | undefined, err: Error): void {
  lastSocketError = (this && (refusedDatabases.get(this) || foreignServers.get(this))) || sentinelFailure(this, err) || err;
  lastSocketErrorTls = !!this && !!(isCluster(this) ? this.options.redisOptions?.tls : (this as Redis).options?.tls);
}

/**
 * Why the connections glidemq made last failed (a refused connection, an untrusted certificate, a
 * rejected password), in one sentence, or undefined. A command that fails only with ioredis's
 * generic "Connection is closed" / "max retries" uses this to say what really went wrong.
 */
export function lastConnectionProblem(): string | undefined {
  const e = lastSocketError as (Error & { code?: string }) | undefined;
  if (!e) return undefined;
  if (e instanceof ConnectionError && (e.code === 'ERR_DATABASE' || e.code === 'ERR_SENTINEL')) return e.message;
  if (TLS_TRUST_CODES.has(e.code ?? '') || /certificate/i.test(e.message)) {
    return `the server's TLS certificate is not trusted (${e.message}); give the CA that signed it with --tls-ca <file> or $GLIDEMQ_TLS_CA`;
  }
  if (e.code === 'ERR_TLS_CERT_ALTNAME_INVALID') return `the server's TLS certificate does not name this host (${e.message})`;
  if (/ is not a Valkey server \(/.test(e.message)) return e.message; // nameForeignServer
  if (/^WRONGPASS/.test(e.message)) return 'authentication failed: wrong user name or password';
  if (/^NOAUTH/.test(e.message)) return 'authentication failed: the server wants a password (in the URL or $GLIDEMQ_PASSWORD)';
  if (/wrong version number|packet length too long|unknown protocol/i.test(e.message)) {
    return `TLS handshake failed (${e.message}); is this a TLS port? rediss:// speaks TLS, redis:// does not`;
  }
  if (e.code === 'ECONNRESET') return 'the server closed the connection (ECONNRESET); a TLS-only port needs rediss://';
  if (e.code === 'ETIMEDOUT' && lastSocketErrorTls) {
    // a plain port reads a TLS hello as a command that never ends, and so never answers it
    return 'no TLS handshake within the connect timeout (ETIMEDOUT); the server there may not speak TLS (a plain port needs redis://)';
  }
  if (/Socket timeout/.test(e.message)) return `the server accepted the connection but did not answer (${e.message.replace(/\.$/, '')})`;
  if (e.code) return e.code;
  return undefined;
}

const TLS_TRUST_CODES = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_GET_ISSUER_CERT',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_UNTRUSTED',
]);

