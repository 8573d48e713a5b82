/**
 * Bad input to every command: each case must exit 2 with exactly one line on stderr that starts
 * with `glidemq:` and says what was wrong (no stack trace, no internals), and the server's keyspace
 * must be exactly as it was before the refused call. The cases run in parallel batches, so the
 * whole table costs a few seconds.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { keyspaceFingerprint } from '../helpers/keyspace.js';
import { useServer } from '../helpers/valkey.js';
import { runCli, type CliResult } from '../helpers/cli.js';
import { fixturePath } from '../helpers/fixtures.js';

interface Case {
  args: string[];
  stdin?: string | Buffer;
  /** What the one line must say. */
  says: RegExp;
}

const echo = fixturePath('processors', 'echo.mjs');
const W = ['worker', echo, '-q', 'q'];
const big = JSON.stringify({ big: 'x'.repeat(600 * 1024) });

const CASES: Case[] = [
  // global options and commands
  { args: ['--url', 'http://x', 'stats', 'q'], says: /unsupported URL scheme/ },
  { args: ['--url', 'redis://h:99999', 'stats', 'q'], says: /invalid server URL/ },
  { args: ['--url', 'redis://h/notadb', 'stats', 'q'], says: /invalid (database number|server URL)/ },
  { args: ['--prefix', 'a{b', 'stats', 'q'], says: /invalid key prefix/ },
  { args: ['--bogus', 'stats', 'q'], says: /unknown option '--bogus'/ },
  { args: ['nosuchcommand'], says: /unknown command 'nosuchcommand'/ },
  // enqueue: arguments and every flag
  { args: ['enqueue'], says: /missing required argument 'queue'/ },
  { args: ['enqueue', 'q', '{bad'], says: /data is not valid JSON/ },
  { args: ['enqueue', 'q{x}', '{}'], says: /invalid queue name "q\{x\}"/ },
  { args: ['enqueue', 'a:b', '{}'], says: /invalid queue name "a:b"/ },
  { args: ['enqueue', 'x'.repeat(300), '{}'], says: /queue name is longer than 200/ },
  { args: ['enqueue', '', '{}'], says: /queue name is empty/ },
  { args: ['enqueue', 'q', '{}', '--priority', '-1'], says: /--priority must be a whole number from 1 to 2097152/ },
  { args: ['enqueue', 'q', '{}', '--priority', '2097153'], says: /--priority/ },
  { args: ['enqueue', 'q', '{}', '--priority', '1.5'], says: /--priority/ },
  { args: ['enqueue', 'q', '{}', '--priority', '1e3'], says: /--priority/ },
  { args: ['enqueue', 'q', '{}', '--delay', '-5'], says: /--delay.*not a duration/ },
  { args: ['enqueue', 'q', '{}', '--delay', '5x'], says: /--delay.*not a duration/ },
  { args: ['enqueue', 'q', '{}', '--delay', '99999999999999999999'], says: /--delay.*too large/ },
  { args: ['enqueue', 'q', '{}', '--delay', 'Infinity'], says: /--delay/ },
  { args: ['enqueue', 'q', '{}', '--attempts', '0'], says: /--attempts must be a whole number/ },
  { args: ['enqueue', 'q', '{}', '--attempts', '99999999999999999999'], says: /--attempts/ },
  { args: ['enqueue', 'q', '{}', '--backoff', 'linear:5'], says: /backoff "linear:5"/ },
  { args: ['enqueue', 'q', '{}', '--backoff', 'fixed:-1'], says: /backoff delay/ },
  { args: ['enqueue', 'q', '{}', '--job-id', 'a:b'], says: /job id "a:b" is invalid/ },
  { args: ['enqueue', 'q', '{}', '--job-id', ''], says: /job id is empty/ },
  { args: ['enqueue', 'q', '{}', '--job-id', 'x'.repeat(300)], says: /job id .* is invalid/ },
  { args: ['enqueue', 'q', '{}', '--lifo', '--priority', '2'], says: /both prioritized and LIFO/ },
  { args: ['enqueue', 'q', '{}', '--name', ''], says: /job name/ },
  { args: ['enqueue', 'q', '{}', '--dedup-mode', 'weird', '--dedup-id', 'a'], says: /--dedup-mode/ },
  { args: ['enqueue', 'q', '{}', '--dedup-ttl', '5s'], says: /need --dedup-id/ },
  { args: ['enqueue', 'q', '{}', '--unknown-flag'], says: /unknown option/ },
  { args: ['enqueue', 'q', '{}', 'extra'], says: /too many arguments/ },
  { args: ['enqueue', 'q', '--ndjson', '{}'], says: /not both/ },
  { args: ['enqueue', 'q', '--envelope', '{}'], says: /--envelope only applies with --ndjson/ },
  // enqueue --ndjson: bad lines, binary and non-UTF-8 input, oversized payloads; nothing is written
  { args: ['enqueue', 'q', '--ndjson'], stdin: '{"a":1}\n{"b":2}\n{bad\n', says: /line 3: not valid JSON/ },
  { args: ['enqueue', 'q', '--ndjson'], stdin: Buffer.from('{"a":1}\n{"s":"\xff\xfe"}\n', 'latin1'), says: /line 2: .*not valid UTF-8/ },
  { args: ['enqueue', 'q', '--ndjson'], stdin: Buffer.from([0x00, 0x01, 0x02, 0x0a, 0x80, 0x81, 0x0a]), says: /line [12]: / },
  { args: ['enqueue', 'q', '--ndjson'], stdin: `{"ok":1}\n${big}\n`, says: /line 2: payload is \d+ bytes, over the limit/ },
  { args: ['enqueue', 'q', '--ndjson', '--envelope'], stdin: '{"name":"a","data":{},"opts":{"priority":-1}}\n', says: /line 1: priority/ },
  { args: ['enqueue', 'q', '--ndjson', '--envelope'], stdin: '[1,2]\n', says: /line 1: an envelope must be an object/ },
  { args: ['enqueue', 'q', '--ndjson', '--envelope'], stdin: '{"name":5,"data":{}}\n', says: /line 1: "name"/ },
  { args: ['enqueue', 'q', '--ndjson', '--envelope'], stdin: '{"name":"a","data":{},"opts":{"attempts":1e400}}\n', says: /line 1: attempts/ },
  // worker
  { args: ['worker'], says: /missing required argument 'script'/ },
  { args: ['worker', echo], says: /--queue <name> is required/ },
  { args: ['worker', 'nonexistent.mjs', '-q', 'q'], says: /nonexistent\.mjs does not exist/ },
  { args: ['worker', fixturePath('processors', 'no-function.mjs'), '-q', 'q'], says: /exports no function/ },
  { args: ['worker', fixturePath('valkey', 'none.conf'), '-q', 'q'], says: /cannot be loaded/ },
  { args: [...W, '-c', '0'], says: /--concurrency/ },
  { args: [...W, '-c', '99999999'], says: /--concurrency/ },
  { args: [...W, '--lock-duration', '0'], says: /--lock-duration/ },
  { args: [...W, '--block-timeout', '-1'], says: /--block-timeout/ },
  { args: [...W, '--stalled-interval', '1h1m'], says: /--stalled-interval/ },
  { args: [...W, '--max-jobs', '0'], says: /--max-jobs/ },
  { args: [...W, '--max-stalled-count', '-1'], says: /--max-stalled-count/ },
  { args: [...W, '--global-concurrency', '0'], says: /--global-concurrency/ },
  { args: ['worker', echo, '-q', 'bad{q}'], says: /invalid queue name/ },
  { args: ['worker', echo, '--broadcast', 'b'], says: /go together/ },
  { args: ['worker', echo, '--broadcast', 'b', '--subscription', 's', '--start-from', 'middle'], says: /--start-from/ },
  // inspection and upkeep
  { args: ['stats'], says: /missing required argument/ },
  { args: ['stats', 'q{'], says: /invalid queue name/ },
  { args: ['stats', 'q', 'extra'], says: /too many arguments/ },
  { args: ['job', 'q'], says: /missing required argument 'id'/ },
  { args: ['job', 'q', '999'], says: /job 999 not found/ },
  { args: ['pause', 'q:'], says: /invalid queue name/ },
  { args: ['pel', 'q', '--min-idle', '-1'], says: /--min-idle/ },
  { args: ['pel', 'q', '--limit', '0'], says: /--limit/ },
  { args: ['pel', 'nosuch'], says: /queue "nosuch" does not exist/ },
  { args: ['reclaim', 'q', '--min-idle', 'x'], says: /--min-idle/ },
  { args: ['reclaim', 'q', '--max-stalled-count', '1.5'], says: /--max-stalled-count/ },
  { args: ['heal'], says: /name at least one queue, or use --all/ },
  { args: ['heal', 'q', '--all'], says: /not both/ },
  { args: ['drain', 'q'], says: /without --yes/ },
  { args: ['clean', 'q', '--state', 'active', '--yes'], says: /--state must be completed or failed/ },
  { args: ['clean', 'q', '--grace', '-1', '--state', 'completed', '--yes'], says: /--grace/ },
  { args: ['clean', 'q', '--yes'], says: /required option '--state/ },
  { args: ['obliterate', 'q'], says: /without --yes/ },
  { args: ['remove', 'q'], says: /missing required argument 'ids'/ },
  { args: ['metrics', 'q', '--minutes', '0'], says: /--minutes/ },
  { args: ['metrics', 'q', '--minutes', '1441'], says: /--minutes/ },
  { args: ['schedulers', 'add', 'q', 'n'], says: /exactly one of --cron or --every/ },
  { args: ['schedulers', 'add', 'q', 'n', '--cron', '61 * * * *'], says: /minute field "61"/ },
  { args: ['schedulers', 'add', 'q', 'n', '--every', '0'], says: /every must be at least/ },
  { args: ['schedulers', 'add', 'q', 'n', '--cron', '* * * * *', '--tz', 'Mars/Olympus'], says: /unknown time zone/ },
  { args: ['schedulers', 'add', 'q', 'n', '--every', '5s', '--data', '{bad'], says: /--data is not valid JSON/ },
  { args: ['schedulers', 'remove', 'q', 'nope'], says: /no scheduler named "nope"/ },
  { args: ['publish', 'b'], says: /missing required argument 'subject'/ },
  { args: ['publish', 'b', 'sub', '{bad'], says: /not valid JSON/ },
  { args: ['publish', 'b', 'a..b', '{}'], says: /empty token/ },
  { args: ['publish', 'b', 'sub', '{}', '--max-messages', '-1'], says: /--max-messages/ },
  { args: ['audit', 'extra'], says: /too many arguments/ },
  { args: ['dev', '--port', '99999'], says: /--port/ },
  { args: ['dev', 'frob'], says: /unknown dev action/ },
];

describe('cli: bad input to every command', function () {
  this.timeout(120000);
  const server = useServer();
  let admin: Redis;
  const results = new Map<Case, CliResult>();
  let keysBefore = '';
  let keysAfter = '';

  const keyspace = () => keyspaceFingerprint(admin);

  before(async () => {
    admin = server().client();
    await runCli(['-u', server().url, 'enqueue', 'q', '{"seed":1}']);
    keysBefore = await keyspace();
    const pending = [...CASES];
    const batch = async () => {
      for (let c = pending.shift(); c; c = pending.shift()) {
        results.set(c, await runCli(['-u', server().url, ...c.args], { input: c.stdin as string | undefined, timeoutMs: 30000 }));
      }
    };
    await Promise.all(Array.from({ length: 6 }, batch));
    keysAfter = await keyspace();
  });
  after(() => admin.disconnect());

  for (const c of CASES) {
    const label =
      c.args.map((a) => (a.includes('/fixtures/') ? a.slice(a.indexOf('fixtures/')) : a.length > 30 ? `${a.slice(0, 12)}…(${a.length})` : a || "''")).join(' ') +
      (c.stdin ? ` < ${c.says.source.slice(0, 30)}` : '');
    it(label, () => {
      const r = results.get(c)!;
      const lines = r.stderr.trim().split('\n');
      expect(r.code, r.stderr).to.equal(2);
      expect(lines, r.stderr).to.have.length(1);
      expect(lines[0]).to.match(/^glidemq: /);
      expect(lines[0]).to.match(c.says);
      expect(r.stderr).not.to.match(/\n\s+at |TypeError|ReferenceError|\bundefined\b|\[object /);
    });
  }

  it('no refused call wrote anything', () => {
    expect(keysAfter).to.equal(keysBefore);
  });
});

describe('cli: a key of the wrong type where glidemq keeps a structure', function () {
  this.timeout(30000);
  const server = useServer();
  let admin: Redis;
  before(() => {
    admin = server().client();
  });
  after(() => admin.disconnect());

  for (const [command, structure] of [
    [['enqueue', 'wt', '{}'], 'stream'],
    [['enqueue', 'wt', '{}', '--priority', '1'], 'prioritized'],
    [['enqueue', 'wt', '{}', '--delay', '1s'], 'scheduled'],
    [['stats', 'wt'], 'stream'],
    [['stats', 'wt'], 'completed'],
  ] as const) {
    it(`${command.join(' ')} with a string at glide:{wt}:${structure}: one line naming the key, exit 2`, async () => {
      await admin.flushall();
      expect((await runCli(['-u', server().url, 'enqueue', 'wt', '{}'])).code).to.equal(0);
      const key = `glide:{wt}:${structure}`;
      await admin.del(key);
      await admin.set(key, 'x');
      const before = (await admin.keys('*')).sort();
      const r = await runCli(['-u', server().url, ...command]);
      expect(r.code).to.equal(2);
      const lines = r.stderr.trim().split('\n');
      expect(lines, r.stderr).to.have.length(1);
      expect(lines[0]).to.contain(`key ${key} holds a string`);
      expect((await admin.keys('*')).sort()).to.deep.equal(before);
      expect(await admin.get(key)).to.equal('x');
    });
  }
});
