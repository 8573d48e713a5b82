/**
 * TLS for tests: a throwaway certificate authority and a server certificate for 127.0.0.1 /
 * localhost made with openssl at test time, and a valkey-server that speaks only TLS.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { readFileSync } from 'node:fs';
import { SERVER_BIN, freePort } from './valkey.js';

export interface TestCerts {
  dir: string;
  caCert: string;
  serverCert: string;
  serverKey: string;
  /** A second CA that did not sign the server's certificate. */
  otherCaCert: string;
}

function openssl(args: string[], cwd: string): void {
  const r = spawnSync('openssl', args, { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`openssl ${args[0]} failed: ${r.stderr}`);
}

/** Makes a CA, a server certificate it signs (SAN 127.0.0.1 and localhost) and an unrelated CA. */
export function makeCerts(): TestCerts {
  const dir = mkdtempSync(join(tmpdir(), 'glidemq-tls-'));
  const days = ['-days', '2'];
  openssl(['req', '-x509', '-new', '-nodes', '-newkey', 'rsa:2048', '-keyout', 'ca.key', '-out', 'ca.crt', ...days, '-subj', '/CN=glidemq test CA'], dir);
  openssl(['req', '-x509', '-new', '-nodes', '-newkey', 'rsa:2048', '-keyout', 'other.key', '-out', 'other.crt', ...days, '-subj', '/CN=unrelated CA'], dir);
  openssl(['req', '-new', '-nodes', '-newkey', 'rsa:2048', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost'], dir);
  writeFileSync(join(dir, 'san.cnf'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  openssl(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.crt', ...days, '-extfile', 'san.cnf'], dir);
  return {
    dir,
    caCert: join(dir, 'ca.crt'),
    serverCert: join(dir, 'server.crt'),
    serverKey: join(dir, 'server.key'),
    otherCaCert: join(dir, 'other.crt'),
  };
}

/** A valkey-server with only a TLS port (`port 0`), client certificates not required. */
export class TlsServer {
  proc: ChildProcess | undefined;
  port = 0;
  readonly dir: string;

  constructor(
    readonly certs: TestCerts,
    private readonly extraConfig: string[] = [],
  ) {
    this.dir = mkdtempSync(join(tmpdir(), 'glidemq-tls-server-'));
  }

  get url(): string {
    return `rediss://127.0.0.1:${this.port}`;
  }

  async start(): Promise<this> {
    this.port = await freePort();
    const conf = [
      'port 0',
      `tls-port ${this.port}`,
      `tls-cert-file ${this.certs.serverCert}`,
      `tls-key-file ${this.certs.serverKey}`,
      `tls-ca-cert-file ${this.certs.caCert}`,
      'tls-auth-clients no',
      'bind 127.0.0.1',
      `dir ${this.dir}`,
      'save ""',
      'appendonly no',
      'loglevel warning',
      `logfile ${join(this.dir, 'server.log')}`,
      ...this.extraConfig,
    ];
    const path = join(this.dir, 'tls.conf');
    writeFileSync(path, conf.join('\n') + '\n');
    const proc = spawn(SERVER_BIN, [path], { stdio: 'ignore' });
    this.proc = proc;
    proc.on('exit', () => {
      if (this.proc === proc) this.proc = undefined;
    });
    const deadline = Date.now() + 15000;
    for (;;) {
      if (!this.proc) throw new Error(`TLS valkey-server exited during start (see ${this.dir}/server.log)`);
      const c = this.client();
      try {
        await c.connect();
        await c.ping();
        c.disconnect();
        return this;
      } catch (err) {
        c.disconnect();
        if (Date.now() > deadline) throw new Error(`TLS valkey-server did not answer: ${String(err)}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** An admin client that trusts the test CA. */
  client(): Redis {
    const c = new Redis({
      host: '127.0.0.1',
      port: this.port,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      tls: { ca: [readFileSync(this.certs.caCert)] },
    });
    c.on('error', () => undefined);
    return c;
  }

  async stop(): Promise<void> {
    const proc = this.proc;
    if (proc && proc.exitCode === null) {
      await new Promise<void>((resolve) => {
        proc.once('exit', () => resolve());
        proc.kill('SIGKILL');
      });
    }
    this.proc = undefined;
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export function hasOpenssl(): boolean {
  return spawnSync('openssl', ['version']).status === 0;
}

/** Mocha hooks: fresh certificates and a TLS-only server for the enclosing describe block. */
export function useTlsServer(): () => TlsServer {
  let server: TlsServer | undefined;
  let certs: TestCerts | undefined;
  before(async () => {
    certs = makeCerts();
    server = await new TlsServer(certs).start();
  });
  after(async () => {
    await server?.stop();
    if (certs) rmSync(certs.dir, { recursive: true, force: true });
  });
  return () => {
    if (!server) throw new Error('the TLS server is not started (use it inside tests)');
    return server;
  };
}
