/**
 * Without a server: how the library is judged from its code (never by running it), the audit's
 * verdicts on a swapped or foreign library, and the ACL rules that let a user change the library.
 */
import { expect } from 'chai';
import type { Check, NodeFacts } from '../../src/audit/audit.js';
import { parseAclList } from '../../src/audit/checks/acl-rules.js';
import { runChecks } from '../../src/audit/checks/index.js';
import {
  declaredVersion, judgeLibrary, LIBRARY_CODE, LIBRARY_CODE_SHA256, LIBRARY_PACKAGE_VERSION, LIBRARY_VERSION, sha256,
} from '../../src/engine/connecting/library.js';

function withVersion(version: string, pkg: string): string {
  return LIBRARY_CODE.replace(/"version":"[^"]+"/, `"version":"${version}"`).replace(/"package":"[^"]+"/, `"package":"${pkg}"`);
}

function facts(over: Partial<NodeFacts>): NodeFacts {
  return {
    address: '10.0.0.1:6379',
    role: 'master',
    inCluster: false,
    config: new Map([['bind', '127.0.0.1'], ['protected-mode', 'yes']]),
    info: new Map(),
    replicas: [],
    library: { state: 'present', version: LIBRARY_VERSION, packageVersion: LIBRARY_PACKAGE_VERSION, codeSha256: LIBRARY_CODE_SHA256 },
    passwordless: false,
    ...over,
  };
}

function check(f: NodeFacts, id: string): Check {
  const c = runChecks(f, { expectedLibraryVersion: LIBRARY_VERSION, packageVersion: LIBRARY_PACKAGE_VERSION }).find((x) => x.id === id);
  if (!c) throw new Error(`no check ${id}`);
  return c;
}

describe('library judged from its code', () => {
  it('reads the version this build declares, and tells each kind of library apart', () => {
    expect(declaredVersion(LIBRARY_CODE)).to.deep.equal({ version: LIBRARY_VERSION, package: LIBRARY_PACKAGE_VERSION });
    // A header comment that describes the JSON (with spaces) is not the JSON the function returns.
    const commented = LIBRARY_CODE.replace('\n', '\n-- Returns {"version": "<hash>", "package": "<package>"}\n');
    expect(declaredVersion(commented)).to.deep.equal({ version: LIBRARY_VERSION, package: LIBRARY_PACKAGE_VERSION });
    const at = (code: string | undefined) => judgeLibrary('h:1', code).state;
    expect(at(undefined)).to.equal('missing');
    expect(at(LIBRARY_CODE)).to.equal('current');
    expect(at(`${LIBRARY_CODE}\n-- changed`)).to.equal('swapped');
    expect(at(withVersion(LIBRARY_VERSION, '99.0.0'))).to.equal('swapped'); // this version's name, another package: not ours
    expect(at(withVersion('0000000000000000', '0.0.1'))).to.equal('older');
    expect(at(withVersion('0000000000000000', LIBRARY_PACKAGE_VERSION))).to.equal('older'); // another build of this package
    expect(at(withVersion('ffffffffffffffff', '99.0.0'))).to.equal('newer');
    expect(at("#!lua name=glidemq\nredis.register_function('glidemq_add', function() return 1 end)")).to.equal('foreign');
    expect(judgeLibrary('h:1', LIBRARY_CODE).codeSha256).to.equal(sha256(LIBRARY_CODE)).and.equal(LIBRARY_CODE_SHA256);
  });
});

describe('audit: function-library on a library nobody should run', () => {
  it('passes this build\'s code, fails this version with other code, and fails a library with no version', () => {
    expect(check(facts({}), 'function-library').status).to.equal('pass');
    const swapped = check(facts({ library: { state: 'present', version: LIBRARY_VERSION, packageVersion: LIBRARY_PACKAGE_VERSION, codeSha256: 'f'.repeat(64) } }), 'function-library');
    expect(swapped.status).to.equal('fail');
    expect(swapped.actual).to.match(/code differs/);
    expect(swapped.message).to.match(/glidemq library install/).and.match(/FUNCTION LOAD/);
    const foreign = check(facts({ library: { state: 'present', codeSha256: 'e'.repeat(64), error: 'its code registers no glidemq_version' } }), 'function-library');
    expect(foreign.status).to.equal('fail');
    expect(foreign.actual).to.match(/declares no glidemq version/);
  });
});

describe('audit: acl-function-users', () => {
  const lines = [
    'user default on nopass sanitize-payload ~* &* +@all',
    'user admin on #ab ~* resetchannels -@all +function|load +function|list',
    'user app on #ab ~glide:* resetchannels -@all +@read +@write -@dangerous -function|flush -function|delete -function|restore +fcall +function|load',
    'user worker on #ab ~glide:* resetchannels -@all +@read +@write -@dangerous -@scripting +fcall +fcall_ro +function|list',
    'user cleaner on #ab resetchannels -@all +function',
    'user cleaner2 on #ab resetchannels +@all -function|load',
    'user scripter on #ab resetchannels -@all +@scripting -@write',
    'user selector on #ab ~glide:* resetchannels -@all +get (~x +function|delete)',
    'user retired off #ab ~* +@all',
  ];

  it('follows categories, the command, its subcommands and selectors, from the left', () => {
    const may = new Map(parseAclList(lines).map((u) => [u.name, u.may]));
    expect(may.get('default')).to.deep.equal(['load', 'delete', 'flush', 'restore']);
    expect(may.get('admin')).to.deep.equal(['load']);
    expect(may.get('app')).to.deep.equal(['load']);
    expect(may.get('worker')).to.deep.equal([]);
    expect(may.get('cleaner')).to.deep.equal(['load', 'delete', 'flush', 'restore']);
    expect(may.get('cleaner2')).to.deep.equal(['delete', 'flush', 'restore']);
    expect(may.get('scripter')).to.deep.equal([]);
    expect(may.get('selector')).to.deep.equal(['delete']);
    expect(parseAclList(lines).find((u) => u.name === 'retired')?.enabled).to.equal(false);
  });

  it('warns naming every enabled user but default that may change the library; pass with none; unknown when ACL LIST is refused', () => {
    const c = check(facts({ acl: { lines } }), 'acl-function-users');
    expect(c.status).to.equal('warn');
    expect(c.actual).to.equal('admin (load); app (load); cleaner (load, delete, flush, restore); cleaner2 (delete, flush, restore); selector (delete)');
    expect(c.message).to.match(/-@scripting/).and.match(/ACL roles/);
    expect(check(facts({ acl: { lines: [lines[0], lines[3], lines[8]] } }), 'acl-function-users').status).to.equal('pass');
    const blind = check(facts({ acl: { error: "NOPERM User x has no permissions to run the 'acl|list' command" } }), 'acl-function-users');
    expect(blind.status).to.equal('unknown');
    expect(blind.message).to.match(/ACL LIST could not be read/);
    expect(runChecks(facts({})).some((x) => x.id === 'acl-function-users')).to.equal(false); // not gathered: no verdict
  });
});
