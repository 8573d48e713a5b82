/**
 * The CLI as a command-line tool: --version, help that shows the global options everywhere, one
 * style for defaults, help wrapped to the width it is shown at, and shell completion generated
 * from the command tree (bash is run for real; zsh and fish are checked as text).
 */
import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import { buildProgram } from '../../src/cli/main.js';
import { COMMANDS } from '../../src/cli/commands/index.js';
import { completionTree } from '../../src/cli/completion.js';
import { runCli } from '../helpers/cli.js';
import { REPO_ROOT } from '../helpers/fixtures.js';
import { inParallel } from '../helpers/parallel.js';


const VERSION: string = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')).version;

/** Every command of the tree with the words that name it (`['schedulers', 'add']`). */
function allCommands(program: Command): { words: string[]; cmd: Command }[] {
  const out: { words: string[]; cmd: Command }[] = [];
  const visit = (cmd: Command, words: string[]) => {
    for (const sub of cmd.commands) {
      out.push({ words: [...words, sub.name()], cmd: sub });
      visit(sub, [...words, sub.name()]);
    }
  };
  visit(program, []);
  return out;
}

describe('CLI: version, help and completion', function () {
  this.timeout(60000);

  it('--version and -V print the package version and exit 0', async () => {
    for (const flag of ['--version', '-V']) {
      const r = await runCli([flag]);
      expect(r.code, flag).to.equal(0);
      expect(r.stdout.trim(), flag).to.equal(VERSION);
    }
  });

  it('each command module registers exactly the names the command table lists for it (a start loads one module)', async () => {
    for (const m of COMMANDS) expect((await buildProgram(m.names[0])).commands.map((c) => c.name()), m.names[0]).to.deep.equal(m.names);
    expect((await buildProgram()).commands.map((c) => c.name())).to.deep.equal(COMMANDS.flatMap((m) => m.names));
  });

  it("every command's help lists the global options and examples, and fits 80 columns", async () => {
    const commands = allCommands(await buildProgram());
    expect(commands.length).to.be.greaterThan(20);
    await inParallel([{ words: [] as string[] }, ...commands], async ({ words }) => {
      const what = words.join(' ') || 'glidemq';
      const r = await runCli([...words, '--help']); // piped, no $COLUMNS: 80
      expect(r.code, what).to.equal(0);
      expect(r.stdout.split('\n').filter((l) => l.length > 80), what).to.deep.equal([]);
      if (words.length === 0) {
        expect(r.stdout, what).to.contain('Examples:'); // the program's own lists the commands, then examples
        return;
      }
      expect(r.stdout, what).to.match(/Global Options:[\s\S]*-u, --url <url>[\s\S]*--prefix <p>[\s\S]*--json/);
      // a command with sub-commands may leave the examples to them (`schedulers add --help`)
      if (!commands.some((c) => c.words.length > words.length && c.words.slice(0, words.length).join(' ') === words.join(' ') && c.words[words.length] !== 'help')) {
        expect(r.stdout, what).to.contain('Examples:');
      }
    });
  });

  it('every default is written one way: "(default: x)" last in the description', async () => {
    const program = await buildProgram();
    const described: string[] = [];
    const commandTexts: string[] = [];
    for (const cmd of [program, ...allCommands(program).map((c) => c.cmd)]) {
      const help = cmd.createHelp(); // with the configuration the program passed on to it
      described.push(...cmd.options.map((o) => help.optionDescription(o)), ...cmd.registeredArguments.map((a) => help.argumentDescription(a)));
      commandTexts.push(cmd.description());
    }
    // an option's or argument's default: only as its last words, "(default: x)"
    expect(described.filter((t) => /\bdefault\b/.test(t.replace(/ \(default: [^()]*\)$/, '')))).to.deep.equal([]);
    // a command's description says "default: x" too
    expect(commandTexts.filter((t) => /\bdefault\b/.test(t.replace(/default: /g, '')))).to.deep.equal([]);
    // commander's own style (quoted JSON) never shows; the defaults commander knows are there
    expect(described.filter((t) => /default: "/.test(t))).to.deep.equal([]);
    expect(described).to.include.members([
      'jobs run at once by this worker (default: 1)',
      'key prefix (keys are <prefix>:{<queue>}:...) (default: $GLIDEMQ_PREFIX, else glide)',
      'a claim idle this long counts as stalled (default: 30s)',
    ]);
  });

  it('help is wrapped to the terminal width ($COLUMNS when not on a terminal); example command lines are broken as a shell reads them', async () => {
    for (const columns of [60, 100]) {
      await inParallel([['worker'], ['reclaim'], ['subscriptions'], ['library', 'install']], async (words) => {
        const r = await runCli([...words, '--help'], { env: { COLUMNS: String(columns) } });
        const lines = r.stdout.split('\n');
        const what = `${words.join(' ')} at ${columns} columns`;
        expect(lines.filter((l) => l.length > columns), what).to.deep.equal([]);
        if (columns === 100) expect(Math.max(...lines.map((l) => l.length)), what).to.be.greaterThan(85);
      });
    }
    // a command too long: broken between words (not inside quotes) with a backslash, its remark a # line
    const narrow = (await runCli(['enqueue', '--help'], { env: { COLUMNS: '60' } })).stdout;
    expect(narrow.replace(/ \\\n {6}/g, ' ')).to.contain(
      `  $ printf '{"name":"resize","data":{"w":64},"opts":{"priority":2}}\\n' | glidemq enqueue images --ndjson --envelope\n`,
    );
    expect(narrow).to.contain(`  $ glidemq enqueue reports --flow flow.json\n      # a parent and its children\n`);
  });

  describe('completion', () => {
    let dir: string;
    before(() => {
      dir = mkdtempSync(join(tmpdir(), 'glidemq-completion-'));
    });
    after(() => rmSync(dir, { recursive: true, force: true }));

    /** What bash offers for the words typed so far (the last one being completed). */
    async function bashOffers(words: string[]): Promise<string[]> {
      const script = join(dir, 'glidemq.bash');
      writeFileSync(script, (await runCli(['completion', 'bash'])).stdout);
      const cword = words.length; // words[0] is glidemq
      const quoted = ['glidemq', ...words].map((w) => `'${w.replace(/'/g, `'\\''`)}'`).join(' ');
      const r = spawnSync('bash', ['--norc', '-c', `source '${script}'; COMP_WORDS=(${quoted}); COMP_CWORD=${cword}; _glidemq; printf '%s\\n' "\${COMPREPLY[@]}"`], {
        encoding: 'utf8',
      });
      expect(r.status, r.stderr).to.equal(0);
      return r.stdout.split('\n').filter(Boolean);
    }

    it('bash completes command names, sub-commands, flags (global ones too) and argument choices', async () => {
      expect(await bashOffers(['st'])).to.deep.equal(['stats']);
      expect(await bashOffers(['w'])).to.deep.equal(['worker', 'workers']);
      expect(await bashOffers(['stats', '--j'])).to.deep.equal(['--json']);
      expect(await bashOffers(['worker', 'x.js', '--fail'])).to.deep.equal(['--fail-fast']);
      expect(await bashOffers(['schedulers', ''])).to.include.members(['list', 'add', 'remove']);
      expect(await bashOffers(['schedulers', 'add', '--cro'])).to.deep.equal(['--cron']);
      expect(await bashOffers(['remove', 'q', '1', '--d'])).to.deep.equal(['--dry-run']);
      expect(await bashOffers(['limit', 'q', '--'])).to.include.members(['--global-concurrency', '--clear', '--url']);
      expect(await bashOffers(['completion', ''])).to.deep.equal(['bash', 'zsh', 'fish']);
      // the value of a flag that takes one is not a command: `-u stats` is a URL
      expect((await bashOffers(['-u', 'redis://h:1', 'li'])).sort()).to.deep.equal(['library', 'limit']);
      expect(await bashOffers(['--prefix', 'stats', 'qu'])).to.deep.equal(['queues']);
      expect(await bashOffers(['-u', ''])).to.deep.equal([]); // file names, from the shell
      expect(await bashOffers(['help', 'obl'])).to.deep.equal(['obliterate']);
    });

    it('bash completes the values of a flag that takes one of a few words (jobs --state), file names for others', async () => {
      expect(await bashOffers(['jobs', 'q', '--state', 'waiting-'])).to.deep.equal(['waiting-children']);
      expect(await bashOffers(['jobs', 'q', '-s', ''])).to.deep.equal(['waiting', 'active', 'delayed', 'prioritized', 'completed', 'failed', 'paused', 'waiting-children']);
      expect(await bashOffers(['export', 'q', '--state', 'w'])).to.deep.equal(['waiting'], 'an export takes no waiting parents');
      expect(await bashOffers(['--json', 'jobs', 'q', '--limit', '5', '--state', 'f'])).to.deep.equal(['failed']);
      expect(await bashOffers(['enqueue', 'q', '--flow', ''])).to.deep.equal([]); // file names, from the shell
      expect(await bashOffers(['jobs', 'q', '--state', 'failed', '--'])).to.include('--limit');
    });

    it('the completion follows the command tree: every command and flag is in each script', async () => {
      const program = await buildProgram();
      const nodes = completionTree(program);
      const scripts = Object.fromEntries(
        await Promise.all(['bash', 'zsh', 'fish'].map(async (sh) => [sh, (await runCli(['completion', sh])).stdout] as const)),
      );
      for (const { words, cmd } of allCommands(program)) {
        expect(nodes.map((n) => n.path), words.join(' ')).to.include(words.join(' '));
        for (const script of Object.values(scripts)) {
          expect(script).to.contain(cmd.name());
          for (const o of cmd.options) if (o.long) expect(script, `${words.join(' ')} ${o.long}`).to.contain(o.long.slice(2));
        }
      }
      expect(scripts.zsh).to.match(/^#compdef glidemq/);
      expect(scripts.zsh).to.contain('compdef _glidemq glidemq');
      expect(scripts.fish).to.contain("complete -c glidemq -n '__glidemq_at \\'worker\\'' -l 'fail-fast'");
      // a flag's few values: fish offers them after the flag, zsh through its values case
      expect(scripts.fish).to.contain("-l 'state' -s 's' -x -a 'waiting active delayed prioritized completed failed paused waiting-children'");
      expect(scripts.zsh).to.contain("'jobs --state') values=('waiting' 'active' 'delayed' 'prioritized' 'completed' 'failed' 'paused' 'waiting-children') ;;");
      const bad = await runCli(['completion', 'tcsh']);
      expect(bad.code).to.equal(2);
      expect(bad.stderr).to.match(/tcsh.*bash, zsh, fish|Allowed choices are bash, zsh, fish/);
    });
  });
});
