/**
 * docs/wire-protocol.md cannot drift from the code it describes (issue 31, from any language):
 * its glidemq_add argument table lists exactly the ARGV that lua/add.lua's header lists (the
 * header the contract test holds to the decodeArgs schemas), in order; every key suffix it names
 * is one lua/helpers.lua KEY_SUFFIX builds; and it names every coded error of LUA_ERRORS.
 * Read as text, no server.
 */
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { LUA_ERRORS } from '../../src/engine/shared/errors.js';
import { loadTree } from '../helpers/lua-source/files.js';
import { functionHeader, parseHeaderArgs } from '../helpers/lua-source/headers.js';
import { keySuffixes } from '../helpers/lua-source/keys.js';
import { findRegistrations } from '../helpers/lua-source/registrations.js';
import { REPO_ROOT } from '../helpers/fixtures.js';

const DOC = readFileSync(`${REPO_ROOT}docs/wire-protocol.md`, 'utf8');

/** The doc's glidemq_add table, between its marker comments: head names, then group field names. */
function documentedAddArgs(): { head: string[]; group: string[] } {
  const m = /<!-- glidemq_add ARGV[^>]*-->([\s\S]*?)<!-- end of glidemq_add ARGV -->/.exec(DOC);
  if (!m) throw new Error('docs/wire-protocol.md has no glidemq_add ARGV table between its marker comments');
  const head: string[] = [];
  const group: string[] = [];
  for (const line of m[1].split('\n')) {
    const h = /^\|\s*`ARGV\[(\d+)\]`\s*\|\s*`(\w+)`/.exec(line);
    const g = /^\|\s*(\d+)\s*\|\s*`group\.(\w+)`/.exec(line);
    if (h) {
      expect(Number(h[1]), `doc row "${line.slice(0, 40)}"`).to.equal(head.length + 1);
      head.push(h[2]);
    } else if (g) {
      expect(Number(g[1]), `doc row "${line.slice(0, 40)}"`).to.equal(group.length + 1);
      group.push(g[2]);
    }
  }
  return { head, group };
}

describe('docs/wire-protocol.md agrees with the code', () => {
  const tree = loadTree();

  it("lists glidemq_add's arguments exactly as lua/add.lua's header does", () => {
    const file = tree.files.get('add.lua')!;
    const section = functionHeader(file, 'glidemq_add', findRegistrations(file).map((r) => r.name));
    expect(section, 'glidemq_add header').to.not.equal(undefined);
    const header = parseHeaderArgs(section!);
    expect(header.head).to.have.length.above(0);
    const doc = documentedAddArgs();
    // (joined, so a failure shows both lists whole)
    expect(doc.head.join(' '), 'ARGV[n] rows').to.equal(header.head.join(' '));
    expect(doc.group.join(' '), 'group.<name> rows').to.equal(header.group.join(' '));
  });

  it('names only key suffixes the library builds', () => {
    const known = new Set(keySuffixes(tree).values());
    known.add(':meta'); // KEYS[1] itself
    const named = [...DOC.matchAll(/`<base>(:[a-z-]+:?)/g)].map((m) => m[1]);
    expect(named).to.have.length.above(5);
    // (`<base>:group:{<id>}` reads as `:group:`, the start of KEY_SUFFIX's `:group:{`)
    const unknown = named.filter((s) => ![...known].some((k) => k === s || k.startsWith(s)));
    expect(unknown, `suffixes not in KEY_SUFFIX (lua/helpers.lua): ${unknown.join(', ')}`).to.deep.equal([]);
  });

  it('names every coded error the library returns', () => {
    const missing = Object.keys(LUA_ERRORS).filter((code) => !DOC.includes(`\`${code}\``));
    expect(missing, 'codes of LUA_ERRORS the doc does not name').to.deep.equal([]);
  });
});
