/**
 * Rules the tests keep because of known bugs of the Valkey they run against, checked in the
 * sources so a new test cannot bring a flake back.
 *
 * FUNCTION FLUSH must say SYNC. Valkey 8.0 up to its backport of valkey-io/valkey#1826 (8.0.1 is
 * installed here) defaults FUNCTION FLUSH to ASYNC (lazyfree-lazy-user-flush yes) and, for a
 * library of more than 64 functions (glidemq has 76), frees them on a background thread that calls
 * lua_unref on the Lua VM the main thread keeps using: a FUNCTION LOAD or FCALL right after it
 * can crash the server (`function_lua.c: 'lua_isfunction(lua, -1)' is not true`). In the suite
 * that surfaced as audit.test's `MaxRetriesPerRequestError`: the fixture server died under its client.
 */
import { expect } from 'chai';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { REPO_ROOT } from '../helpers/fixtures.js';

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sources(path));
    else if (name.endsWith('.ts')) out.push(path);
  }
  return out;
}

/** `'FUNCTION', 'FLUSH'` (any quotes, any case) not followed by `, 'SYNC'`. */
const ASYNC_FLUSH = /(['"`])function\1\s*,\s*(['"`])flush\2(?!\s*,\s*(['"`])sync\3)/gi;

describe('tests avoid known Valkey bugs', () => {
  it('every FUNCTION FLUSH in test/ and src/ is SYNC (async flush of a big library can crash Valkey 8.0)', () => {
    const offenders: string[] = [];
    for (const file of [...sources(join(REPO_ROOT, 'test')), ...sources(join(REPO_ROOT, 'src'))]) {
      if (file.endsWith('valkey-workarounds.test.ts')) continue;
      const lines = readFileSync(file, 'utf8').split('\n');
      lines.forEach((line, i) => {
        if (ASYNC_FLUSH.test(line)) offenders.push(`${relative(REPO_ROOT, file)}:${i + 1}: ${line.trim()}`);
        ASYNC_FLUSH.lastIndex = 0;
      });
    }
    expect(offenders, 'write FUNCTION FLUSH SYNC').to.deep.equal([]);
  });
});
