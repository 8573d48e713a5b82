/**
 * The contract between lua/ and src/engine/, checked by reading lua/ as text (no server; issue 15).
 * Why without a server: these are facts of the source (which key names, which limits, which
 * argument layout), and a mismatch should fail in `make test-unit` before any integration test
 * meets it as a confusing runtime error.
 *
 * Checked:
 *  1. key names: every key the Lua builds is one src/engine/shared/keys.ts builds for a sample queue or
 *     broadcast, and back (sets compared, with a diff);
 *  2. shared limits agree (priority, metrics retention, job/group/dedup id lengths, subject length);
 *  3. each function file's header lists the ARGV that its decodeArgs schemas decode, in order;
 *  4. server time: no header lists a `now` argument, and a function that uses `now` calls serverNow();
 *  5. every function is registered through register() (helpers.lua), names unique;
 *  6. lua/ORDER: helpers, a `# functions` line, functions; helpers register nothing; a function
 *     file's top-level locals are used by no other file;
 *  7. the joined library (as src/engine/connecting/library-code.ts joins it) stays well under Lua 5.1's 200 active
 *     locals in its main chunk: at most LOCALS_BUDGET at any point (a file's `do ... end` releases
 *     the locals it declares inside);
 *  8. the coded errors the Lua raises are exactly src/engine/shared/errors.ts LUA_ERRORS (errors.ts says so).
 *
 * The reading is done by test/helpers/lua-source/: a small tokenizer (comments dropped, strings
 * kept) and block counting (function/do/if/repeat ... end/until), enough for these checks, not a
 * Lua parser. The header format part 3 reads is described in headers.ts there (HEADER FORMAT).
 * When this test cannot find what it looks for, it says so and fails rather than passing on nothing.
 */
import { expect } from 'chai';
import { READ_ONLY_FUNCTIONS } from '../../src/engine/connecting/library.js';
import { LUA_ERRORS } from '../../src/engine/shared/errors.js';
import { BroadcastKeys, MAX_GROUP_ID, QueueKeys, validateGroupId } from '../../src/engine/shared/keys.js';
import { METRICS_RETENTION_MINUTES } from '../../src/engine/inspecting/metrics.js';
import * as optionsModule from '../../src/engine/producing/options.js';
import { encodeDedup, encodeJob, MAX_DEDUP_TTL_MS, MAX_JOB_NAME_BYTES, MAX_PRIORITY } from '../../src/engine/producing/options.js';
import { MAX_SUBJECT, validateSubject } from '../../src/engine/shared/subjects.js';
import { argvProblems } from '../helpers/lua-source/argv.js';
import { blockDepths } from '../helpers/lua-source/blocks.js';
import { luaErrorCodes } from '../helpers/lua-source/error-codes.js';
import { BROADCAST_FILE, joinedLibraryTokens, libraryFiles, loadTree, type Tree } from '../helpers/lua-source/files.js';
import { headerNowArguments } from '../helpers/lua-source/headers.js';
import { diffKeys, keyDiffMessage, tsKeys } from '../helpers/lua-source/key-templates.js';
import { BBASE, keySuffixes, luaKeys, QBASE } from '../helpers/lua-source/keys.js';
import { luaConstant, luaLengthCheck } from '../helpers/lua-source/limits.js';
import { localsLeftInScope, mainChunkLocalsPeak, topLevelLocals, variableUses } from '../helpers/lua-source/locals.js';
import { findRegistrations, type Registration, usesNowWithoutServerNow } from '../helpers/lua-source/registrations.js';

/**
 * Fail above this many locals active at once in the main chunk. Lua 5.1 refuses the library at
 * 200; the budget fails long before, while there is still room to move a helper into a block.
 */
const LOCALS_BUDGET = 150;

/** An id of more than `limit` UTF-8 bytes but at most `limit` UTF-16 characters. */
const multibyteOver = (limit: number) => 'é'.repeat(Math.floor(limit / 2) + 1);

function throws(fn: () => unknown): boolean {
  try {
    fn();
    return false;
  } catch {
    return true;
  }
}

function note(message: string): void {
  console.log(`      note: ${message}`);
}

describe('lua/ contract (read as text, no server)', () => {
  let tree: Tree;
  let registrations: Registration[] = [];
  let loadError: unknown;
  try {
    tree = loadTree();
    registrations = libraryFiles(tree).flatMap(findRegistrations);
  } catch (err) {
    loadError = err;
  }

  it('reads lua/ and lua/ORDER, and every file tokenizes into balanced blocks', () => {
    if (loadError) throw loadError;
    const bad = [...tree.files.values()].filter((f) => f.blockProblem).map((f) => `${f.name}: ${f.blockProblem}`);
    expect(bad, `files this test cannot read (a mid-edit file, or a gap in the test's tokenizer):\n  ${bad.join('\n  ')}`).to.deep.equal([]);
  });
  if (loadError) return;

  describe('key names', () => {
    it('every queue key the Lua builds is one QueueKeys builds, and back', () => {
      const suffix = keySuffixes(tree);
      expect(suffix.size, 'KEY_SUFFIX table (local KEY_SUFFIX = { name = ":suffix", ... }) not found in a helper file').to.be.greaterThan(0);
      const lua = luaKeys(tree, 'queue').found;
      const ts = tsKeys(new QueueKeys('q', 'glide'), 'glide:{q}', QBASE);
      const d = diffKeys(lua, ts);
      expect(d, keyDiffMessage('queue keys', lua, ts, d)).to.deep.equal({ luaOnly: [], tsOnly: [] });
    });

    it('KEY_SUFFIX names that are QueueKeys getters have the same suffix', () => {
      const sample = new QueueKeys('q', 'glide') as unknown as Record<string, unknown>;
      const differ: string[] = [];
      for (const [name, suffix] of keySuffixes(tree)) {
        const ts = sample[name];
        if (typeof ts === 'string' && ts !== `glide:{q}${suffix}`) differ.push(`${name}: Lua '${suffix}', keys.ts '${ts.slice('glide:{q}'.length)}'`);
      }
      expect(differ, differ.join('\n')).to.deep.equal([]);
    });

    it('every broadcast key broadcast.lua builds is one BroadcastKeys builds, and back', () => {
      const lua = luaKeys(tree, 'broadcast').found;
      const ts = tsKeys(new BroadcastKeys('b', 'glide'), 'glide:{b}:broadcast', BBASE);
      const d = diffKeys(lua, ts);
      expect(d, keyDiffMessage('broadcast keys', lua, ts, d)).to.deep.equal({ luaOnly: [], tsOnly: [] });
    });

    it('function files read only queue key names KEY_SUFFIX defines (k.<name>)', () => {
      const unknown = luaKeys(tree, 'queue').unknownNames;
      expect(unknown, `k.<name> is nil at run time for a name KEY_SUFFIX lacks:\n  ${unknown.join('\n  ')}`).to.deep.equal([]);
    });
  });

  describe('limits shared by the Lua and the TypeScript', () => {
    it('MAX_PRIORITY', () => {
      const lua = luaConstant(tree, /^MAX_PRIORITY$/);
      expect(lua, 'no top-level local MAX_PRIORITY = <number> in lua/').to.not.equal(undefined);
      expect(lua!.value, `${lua!.where} vs src/engine/producing/options.ts MAX_PRIORITY`).to.equal(MAX_PRIORITY);
    });

    it('metrics retention (minutes)', () => {
      const lua = luaConstant(tree, /^METRICS_RETENTION_MINUTES$/);
      expect(lua, 'no top-level local METRICS_RETENTION_MINUTES = <number> in lua/').to.not.equal(undefined);
      expect(lua!.value, `${lua!.where} vs src/engine/inspecting/metrics.ts METRICS_RETENTION_MINUTES`).to.equal(METRICS_RETENTION_MINUTES);
    });

    describe('job id length (args.lua MAX_ID_LEN, in bytes)', () => {
      const lua = () => {
        const l = luaConstant(tree, /^MAX_ID_LEN$/);
        expect(l, 'no top-level local MAX_ID_LEN = <number> in lua/ (args.lua)').to.not.equal(undefined);
        return l!;
      };
      const job = (id: string) => () => encodeJob('n', {}, { jobId: id });

      it('encodeJob accepts an id of MAX_ID_LEN and refuses MAX_ID_LEN + 1 (ASCII)', () => {
        const { value, where } = lua();
        const ts = Object.entries(optionsModule).find(([k]) => /^MAX_(JOB_)?ID(_LEN)?$/.test(k));
        if (ts) expect(ts[1], `${where} vs options.ts ${ts[0]}`).to.equal(value);
        else {
          note(`options.ts exports no job id length constant (encodeJob checks a literal); pinned Lua ${where} = 256`);
          expect(value, `${where} changed: change encodeJob's check in options.ts and this pin together`).to.equal(256);
        }
        expect(throws(job('a'.repeat(value))), `encodeJob refuses an id of ${value} bytes`).to.equal(false);
        expect(throws(job('a'.repeat(value + 1))), `encodeJob accepts an id of ${value + 1} bytes`).to.equal(true);
      });

      it('encodeJob refuses an id over MAX_ID_LEN bytes in fewer characters (the Lua counts bytes)', () => {
        const { value, where } = lua();
        const id = multibyteOver(value);
        expect(throws(job(id)), `encodeJob accepts a ${Buffer.byteLength(id)}-byte id of ${id.length} characters that ${where} refuses`).to.equal(true);
      });
    });

    describe('group id length', () => {
      const lua = () => {
        const l = luaConstant(tree, /^MAX_GROUP_ID/) ?? luaLengthCheck(tree, 'group.lua', /(^|\.)id$/i);
        expect(l, 'no group id length limit found (a MAX_GROUP_ID* constant, or "#spec.id > N" in group.lua)').to.not.equal(undefined);
        return l!;
      };

      it('keys.ts MAX_GROUP_ID equals the Lua limit', () => {
        const { value, where } = lua();
        expect(MAX_GROUP_ID, `${where} vs keys.ts MAX_GROUP_ID`).to.equal(value);
        expect(throws(() => validateGroupId('g'.repeat(value)))).to.equal(false);
        expect(throws(() => validateGroupId('g'.repeat(value + 1)))).to.equal(true);
      });

      it('validateGroupId refuses an id over the limit in bytes in fewer characters (the Lua counts bytes)', () => {
        const { value, where } = lua();
        const id = multibyteOver(value);
        expect(throws(() => validateGroupId(id)), `validateGroupId accepts a ${Buffer.byteLength(id)}-byte id that ${where} refuses`).to.equal(true);
      });
    });

    it('dedup id length (dedup.lua vs options.ts encodeDedup, both in bytes)', () => {
      const l = luaConstant(tree, /DEDUP.*(ID|LEN)/) ?? luaLengthCheck(tree, 'dedup.lua', /id$/i);
      expect(l, 'no dedup id length limit found (a *DEDUP*ID* constant, or "#id > N" in dedup.lua)').to.not.equal(undefined);
      const { value, where } = l!;
      note(`options.ts exports no dedup id constant (encodeDedup checks a literal); pinned Lua ${where} = 512`);
      expect(value, `${where} changed: change encodeDedup in options.ts and this pin together`).to.equal(512);
      expect(throws(() => encodeDedup({ id: 'd'.repeat(value) }, 0)), `encodeDedup refuses ${value} bytes`).to.equal(false);
      expect(throws(() => encodeDedup({ id: 'd'.repeat(value + 1) }, 0)), `encodeDedup accepts ${value + 1} bytes`).to.equal(true);
      expect(throws(() => encodeDedup({ id: multibyteOver(value) }, 0)), 'encodeDedup counts characters, not bytes').to.equal(true);
    });

    it('job name length (jobs.lua MAX_JOB_NAME_LEN vs options.ts MAX_JOB_NAME_BYTES, both in bytes)', () => {
      const l = luaConstant(tree, /^MAX_JOB_NAME_LEN$/);
      expect(l, 'no top-level local MAX_JOB_NAME_LEN = <number> in lua/').to.not.equal(undefined);
      expect(MAX_JOB_NAME_BYTES, `${l!.where} vs options.ts MAX_JOB_NAME_BYTES`).to.equal(l!.value);
      expect(throws(() => encodeJob('n'.repeat(l!.value), {})), `encodeJob refuses a name of ${l!.value} bytes`).to.equal(false);
      expect(throws(() => encodeJob('n'.repeat(l!.value + 1), {})), `encodeJob accepts ${l!.value + 1} bytes`).to.equal(true);
      expect(throws(() => encodeJob(multibyteOver(l!.value), {})), 'encodeJob counts characters, not bytes').to.equal(true);
    });

    it('dedup ttl (dedup.lua DEDUP_MAX_TTL vs options.ts MAX_DEDUP_TTL_MS)', () => {
      const l = luaConstant(tree, /^DEDUP_MAX_TTL$/);
      expect(l, 'no top-level local DEDUP_MAX_TTL = <number> in lua/').to.not.equal(undefined);
      expect(MAX_DEDUP_TTL_MS, `${l!.where} vs options.ts MAX_DEDUP_TTL_MS`).to.equal(l!.value);
      expect(throws(() => encodeDedup({ id: 'd', ttl: l!.value }, 0))).to.equal(false);
      expect(throws(() => encodeDedup({ id: 'd', ttl: l!.value + 1 }, 0))).to.equal(true);
    });

    it('subject length (subjects.ts MAX_SUBJECT vs broadcast.lua, when the Lua checks it)', () => {
      const l = luaConstant(tree, /SUBJECT/) ?? luaLengthCheck(tree, BROADCAST_FILE, /subject$/i);
      if (!l) {
        note(`broadcast.lua checks no subject length: subjects.ts MAX_SUBJECT = ${MAX_SUBJECT} is the only limit`);
        return;
      }
      expect(MAX_SUBJECT, `${l.where} vs subjects.ts MAX_SUBJECT`).to.equal(l.value);
      const s = multibyteOver(l.value);
      expect(throws(() => validateSubject(s)), `validateSubject accepts a ${Buffer.byteLength(s)}-byte subject that ${l.where} refuses`).to.equal(true);
    });
  });

  describe('each function header lists the ARGV its decodeArgs schemas decode', () => {
    for (const reg of registrations) {
      it(`${reg.name} (${reg.file.name})`, () => {
        const problems = argvProblems(tree, reg, registrations);
        expect(problems, `${reg.name} (${reg.file.name}):\n  ${problems.join('\n  ')}`).to.deep.equal([]);
      });
    }
  });

  describe('server time', () => {
    it('no function header lists a `now` argument (the functions read the server clock)', () => {
      const found = headerNowArguments(tree);
      expect(found, `headers that still take the caller's clock:\n  ${found.join('\n  ')}`).to.deep.equal([]);
    });

    it('every function that uses `now` calls serverNow()', () => {
      const bad = registrations.filter(usesNowWithoutServerNow).map((reg) => `${reg.name} (${reg.file.name}:${reg.line})`);
      expect(bad, `functions that use a \`now\` not read from serverNow():\n  ${bad.join('\n  ')}`).to.deep.equal([]);
    });
  });

  describe('registration', () => {
    it('every function is registered through register() (helpers.lua), none with redis.register_function', () => {
      const direct = registrations.filter((r) => r.direct).map((r) => `${r.name} (${r.file.name}:${r.line})`);
      expect(direct, `registered directly, so a raw Lua error escapes uncoded:\n  ${direct.join('\n  ')}`).to.deep.equal([]);
    });

    it('function names are unique, glidemq_-prefixed, and there is at least one', () => {
      expect(registrations.length).to.be.greaterThan(0);
      const names = registrations.map((r) => r.name);
      const dupes = names.filter((n, i) => names.indexOf(n) !== i);
      expect(dupes, 'registered twice (FUNCTION LOAD refuses the library)').to.deep.equal([]);
      expect(names.filter((n) => !n.startsWith('glidemq_')), 'not glidemq_-prefixed').to.deep.equal([]);
    });

    it("the client calls exactly the 'no-writes' functions with FCALL_RO (READ_ONLY_FUNCTIONS)", () => {
      const flagged = registrations.filter((r) => r.readOnly).map((r) => r.name).sort();
      expect([...READ_ONLY_FUNCTIONS].sort(), "library.ts READ_ONLY_FUNCTIONS differs from the functions registered with { 'no-writes' }").to.deep.equal(flagged);
    });
  });

  describe('lua/ORDER', () => {
    it('has helpers, a "# functions" line, then functions, and lists every lua/*.lua once', () => {
      const listed = [...tree.order.helpers, ...tree.order.functions];
      const problems = [...tree.order.problems];
      for (const f of listed) if (!tree.files.has(f)) problems.push(`ORDER lists ${f}, which does not exist`);
      for (const f of tree.files.keys()) if (!listed.includes(f)) problems.push(`${f} is not in ORDER (it is not part of the library)`);
      for (const f of listed.filter((x, i) => listed.indexOf(x) !== i)) problems.push(`ORDER lists ${f} twice`);
      expect(problems, problems.join('\n')).to.deep.equal([]);
    });

    it('helper files register no function; each function file registers one or more', () => {
      const problems: string[] = [];
      for (const f of tree.order.helpers) {
        for (const r of registrations.filter((x) => x.file.name === f)) problems.push(`helper ${f} registers ${r.name}: move it below "# functions"`);
      }
      for (const f of tree.order.functions) {
        if (tree.files.has(f) && !registrations.some((r) => r.file.name === f)) problems.push(`${f} is under "# functions" but registers nothing: it is a helper`);
      }
      expect(problems, problems.join('\n')).to.deep.equal([]);
    });

    it('no top-level local of a function file is used by another file', () => {
      const problems: string[] = [];
      const all = libraryFiles(tree);
      for (const f of tree.order.functions.flatMap((n) => tree.files.get(n) ?? [])) {
        for (const local of topLevelLocals(f.toks, f.depth)) {
          for (const other of all.filter((o) => o !== f)) {
            const uses = variableUses(other.toks, local.name);
            if (uses.length) problems.push(`${f.name}:${local.line} local ${local.name} is also used in ${other.name} (line ${uses.join(', ')})`);
          }
        }
      }
      expect(problems, `a function file's locals are its own (move shared ones into a helper file, or rename):\n  ${problems.join('\n  ')}`).to.deep.equal([]);
    });
  });

  describe('library size', () => {
    it(`the joined library's main chunk holds at most ${LOCALS_BUDGET} locals at once (Lua 5.1 refuses 200)`, async () => {
      const toks = await joinedLibraryTokens();
      const { depth, problem } = blockDepths(toks);
      expect(problem, 'the joined library does not tokenize into balanced blocks').to.equal(undefined);
      const peak = mainChunkLocalsPeak(toks);
      const kept = topLevelLocals(toks, depth).length;
      console.log(`      main-chunk locals: at most ${peak} active at once, ${kept} still in scope at the end (budget ${LOCALS_BUDGET}, Lua's limit 200)`);
      expect(peak, `over budget; locals each file leaves in scope: ${localsLeftInScope(tree)}`).to.be.at.most(LOCALS_BUDGET);
    });
  });

  describe('error codes', () => {
    it('the codes the Lua raises are exactly those errors.ts LUA_ERRORS maps', () => {
      const lua = luaErrorCodes(tree);
      const ts = new Set(Object.keys(LUA_ERRORS));
      expect({ notMapped: [...lua].filter((c) => !ts.has(c)).sort(), neverRaised: [...ts].filter((c) => !lua.has(c)).sort() })
        .to.deep.equal({ notMapped: [], neverRaised: [] });
    });
  });
});
