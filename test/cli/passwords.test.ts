/**
 * No password is ever printed: user names and passwords holding "@", "/", "%", "#" and "?" — written
 * percent-encoded (they authenticate) or as typed (an "@" authenticates: the parser takes the last
 * one; the others are refused as an invalid URL) — never show their password in stdout or stderr, on
 * any command's error path (wrong port, wrong password, invalid URL), plain or `--json`. Redaction
 * cuts where the connection's own URL parse does, so `redis://u:p@ss@h` shows as `u:***@h`.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { freePort, useServer } from '../helpers/valkey.js';
import { spawn } from 'node:child_process';
import { GLIDEMQ_BIN, runCli, type CliResult } from '../helpers/cli.js';
import { fixturePath } from '../helpers/fixtures.js';
import { uniqueQueue } from '../helpers/engine.js';
import { inParallel } from '../helpers/parallel.js';
import { installLibrary } from '../../src/engine/connecting/library.js';
import { redactUrl } from '../../src/engine/connecting/connection.js';

interface Account {
  /** The special character this account's user name and password hold. */
  char: string;
  user: string;
  password: string;
}

/** Each password's letters are unique words, so any piece of it in the output is found. */
const ACCOUNTS: Account[] = [
  { char: '@', user: 'ops@team', password: 'pw@Alpha@Amber1' },
  { char: '/', user: 'ops/eu', password: 'pw/Bravo/Birch2' },
  { char: '%', user: 'ops%ab', password: 'pw%Charlie%Cedar3' },
  { char: '#', user: 'ops#one', password: 'pw#Delta#Dune4' },
  { char: '?', user: 'ops?two', password: 'pw?Echo?Elm5' },
];

/** The pieces of a password between its special characters (and the whole, raw and encoded). */
function secretPieces(password: string): string[] {
  const pieces = password.split(/[@/%#?]/).filter((p) => p.length >= 4);
  return [password, encodeURIComponent(password), ...pieces];
}

function noPassword(r: CliResult, password: string, what: string): void {
  const out = r.stdout + r.stderr;
  for (const piece of secretPieces(password)) expect(out, `${what}: the output shows "${piece}" of the password:\n${out}`).not.to.include(piece);
}

function oneLine(r: CliResult, what: string): string {
  const lines = r.stderr.trim().split('\n');
  expect(lines, `${what}: ${r.stderr}`).to.have.length(1);
  return lines[0];
}

/**
 * A worker keeps retrying a server it cannot reach (it is meant to outlive an outage): run it for a
 * while, then stop it the way an operator does (SIGINT, then a second one), and collect its output.
 */
function runWorkerFor(args: string[], ms: number): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, GLIDEMQ_URL: undefined, GLIDEMQ_PASSWORD: undefined, NO_COLOR: '1', GLIDEMQ_DEBUG: undefined };
    const child = spawn(process.execPath, [GLIDEMQ_BIN, ...args], { env, stdio: 'pipe' });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timers = [
      setTimeout(() => child.kill('SIGINT'), ms),
      setTimeout(() => child.kill('SIGINT'), ms + 1000),
      setTimeout(() => child.kill('SIGKILL'), ms + 5000),
    ];
    child.on('error', reject);
    child.on('close', (code, signal) => {
      for (const t of timers) clearTimeout(t);
      resolve({ code, signal, stdout, stderr });
    });
    child.stdin.end();
  });
}

const encoded = (a: Account, host: string, password = a.password) =>
  `redis://${encodeURIComponent(a.user)}:${encodeURIComponent(password)}@${host}`;
const typed = (a: Account, host: string, password = a.password) => `redis://${a.user}:${password}@${host}`;

describe('cli: no password is ever printed', function () {
  this.timeout(120000);
  const server = useServer();
  let admin: Redis;
  let downPort: number;
  const host = () => `127.0.0.1:${server().port}`;

  before(async () => {
    admin = server().client();
    for (const a of ACCOUNTS) await admin.call('ACL', 'SETUSER', a.user, 'reset', 'on', `>${a.password}`, '~*', '&*', '+@all');
    await installLibrary(admin);
    downPort = await freePort();
  });
  after(() => {
    admin.disconnect();
  });

  it('redacts where the connection parses: the last "@" ends the credentials, the first ":" the user name', () => {
    expect(redactUrl('redis://u:p@ss@h:1')).to.equal('redis://u:***@h:1');
    expect(redactUrl('redis://us@er:p@ss@h:1/2')).to.equal('redis://us@er:***@h:1/2');
    expect(redactUrl('redis://u:p/ss@h:1')).to.equal('redis://u:***@h:1');
    expect(redactUrl('redis://u:p#s?s@h:1')).to.equal('redis://u:***@h:1');
    expect(redactUrl('valkeys://:p%zz@h')).to.equal('valkeys://:***@h');
    expect(redactUrl('redis://secret@h')).to.equal('redis://***@h');
    expect(redactUrl('u:secret@h:1')).to.equal('u:***@h:1');
    expect(redactUrl('redis://h:1/0')).to.equal('redis://h:1/0');
    expect(redactUrl(redactUrl('redis://u:p@ss@h:1'))).to.equal('redis://u:***@h:1');
  });

  it('percent-encoded user names and passwords with @ / % # ? authenticate, and no output shows them', async () => {
    await inParallel(ACCOUNTS, async (a) => {
      const q = uniqueQueue('pw');
      const url = encoded(a, host());
      const add = await runCli(['-u', url, 'enqueue', q, '{"n":1}']);
      expect(add.code, `${a.char}: ${add.stderr}`).to.equal(0);
      noPassword(add, a.password, `enqueue ${a.char}`);
      const stats = await runCli(['-u', url, '--json', 'stats', q]);
      expect(stats.code, `${a.char}: ${stats.stderr}`).to.equal(0);
      expect(JSON.parse(stats.stdout).waiting).to.equal(1);
      noPassword(stats, a.password, `stats ${a.char}`);
      const work = await runCli(['-u', url, '--json', 'worker', fixturePath('processors', 'echo.mjs'), '--queue', q, '--max-jobs', '1']);
      expect(work.code, `${a.char}: ${work.stderr}`).to.equal(0);
      noPassword(work, a.password, `worker ${a.char}`);
      const audit = await runCli(['-u', url, '--json', 'audit']);
      expect(audit.code, `${a.char}: ${audit.stderr}`).to.be.oneOf([0, 1]);
      noPassword(audit, a.password, `audit ${a.char}`);
    });
  });

  it('an "@" typed as is in user name and password authenticates (the parse takes the last "@")', async () => {
    const a = ACCOUNTS[0];
    const r = await runCli(['-u', typed(a, host()), '--json', 'stats', uniqueQueue('pw')]);
    expect(r.code, r.stderr).to.equal(0);
    noPassword(r, a.password, 'typed @');
  });

  const COMMANDS: [string, string[]][] = [
    ['stats', ['stats', 'q']],
    ['stats --json', ['--json', 'stats', 'q']],
    ['enqueue', ['enqueue', 'q', '{}']],
    ['enqueue --json', ['--json', 'enqueue', 'q', '{}']],
    ['audit', ['audit']],
    ['audit --json', ['--json', 'audit']],
    ['queues', ['queues']],
    ['worker', ['worker', 'PROCESSOR', '--queue', 'q', '--max-jobs', '1']],
    ['worker --json', ['--json', 'worker', 'PROCESSOR', '--queue', 'q', '--max-jobs', '1']],
  ];
  const args = (command: string[]) => command.map((a) => (a === 'PROCESSOR' ? fixturePath('processors', 'echo.mjs') : a));

  it('a wrong port: exit 2, one line naming user:***@host, no password (every command, plain and --json)', async () => {
    const target = `127.0.0.1:${downPort}`;
    // typed as is, only an "@" makes a URL that parses (the others are the usage errors below)
    const runs = ACCOUNTS.flatMap((a) =>
      (a.char === '@' ? [encoded(a, target), typed(a, target)] : [encoded(a, target)]).flatMap((url) =>
        COMMANDS.filter(([w]) => !w.startsWith('worker')).map(([what, command]) => ({ a, url, what, command })),
      ),
    );
    await inParallel(runs, async ({ a, url, what, command }) => {
      const r = await runCli(['-u', url, ...args(command)]);
      const label = `${a.char} ${url === typed(a, target) ? 'typed' : 'encoded'} ${what}`;
      expect(r.code, `${label}: ${r.stderr}`).to.equal(2);
      const line = oneLine(r, label);
      expect(line, label).to.include(`:***@${target}`);
      noPassword(r, a.password, label);
    });
  });

  it('a worker waiting for a server it cannot reach shows no password, plain or --json', async () => {
    const target = `127.0.0.1:${downPort}`;
    const runs = await Promise.all(
      ACCOUNTS.flatMap((a) =>
        COMMANDS.filter(([w]) => w.startsWith('worker')).map(async ([what, command]) => {
          const r = await runWorkerFor(['-u', encoded(a, target), ...args(command)], 2500);
          return { r, a, label: `${a.char} ${what}` };
        }),
      ),
    );
    for (const { r, a, label } of runs) {
      expect(r.code, `${label} exited 0 without a server: ${r.stderr}`).not.to.equal(0);
      noPassword(r, a.password, label);
    }
  });

  it('a wrong password: exit 2, authentication failed, neither password shown (every command, plain and --json)', async () => {
    const runs = ACCOUNTS.flatMap((a) => COMMANDS.map(([what, command]) => ({ a, what, command })));
    await inParallel(runs, async ({ a, what, command }) => {
      const wrong = `${a.password}Wrong${a.char}Zulu9`;
      const r = await runCli(['-u', encoded(a, host(), wrong), ...args(command)]);
      const label = `${a.char} ${what}`;
      expect(r.code, `${label}: ${r.stderr}`).to.equal(2);
      expect(oneLine(r, label), label).to.match(/authentication failed/i).and.include(`:***@${host()}`);
      noPassword(r, wrong, label);
      noPassword(r, a.password, label);
    });
  });

  it('"/", "%", "#" and "?" typed as is: a usage error that explains the encoding and shows no password', async () => {
    const runs = ACCOUNTS.slice(1).flatMap((a) => COMMANDS.map(([what, command]) => ({ a, what, command })));
    await inParallel(runs, async ({ a, what, command }) => {
      const r = await runCli(['-u', typed(a, host()), ...args(command)]);
      const label = `${a.char} ${what}`;
      expect(r.code, `${label}: ${r.stderr}`).to.equal(2);
      expect(oneLine(r, label), label).to.match(/invalid server URL/).and.include('%2F').and.include(`:***@${host()}`);
      noPassword(r, a.password, label);
    });
  });

  it('the password from $GLIDEMQ_PASSWORD and a bad database number are not shown either', async () => {
    const a = ACCOUNTS[1];
    const viaEnv = await runCli(['-u', `redis://${encodeURIComponent(a.user)}@127.0.0.1:${downPort}`, '--json', 'stats', 'q'], {
      env: { GLIDEMQ_PASSWORD: a.password },
    });
    expect(viaEnv.code).to.equal(2);
    noPassword(viaEnv, a.password, 'env');
    const badDb = await runCli(['-u', `${encoded(a, host())}/notadb`, 'stats', 'q']);
    expect(badDb.code).to.equal(2);
    expect(oneLine(badDb, 'bad db')).to.match(/invalid database number/);
    noPassword(badDb, a.password, 'bad db');
  });
});
