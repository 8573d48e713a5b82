/**
 * The glidemq function library on the node: whether it is the one this build uses, an older or a
 * newer one, or one that no client will run (a swapped library that copies this build's version
 * with other code, or a library named glidemq that declares no version at all).
 */
import { compareVersions, LIBRARY_CODE_SHA256, LIBRARY_VERSION } from '../../engine/connecting/library.js';
import type { Check, CheckModule, LibraryFacts } from '../types.js';

const ID = 'function-library';
const REINSTALL =
  'an administrator reinstalls it with `glidemq library install` and removes FUNCTION LOAD from every user that does not need it ' +
  '(see the acl-function-users check and README "ACL roles")';

/**
 * A library that reports this build's version must carry this build's code: anyone allowed to
 * FUNCTION LOAD can copy a version string, and clients refuse such a library, so the queue stops.
 */
function untrusted(lib: LibraryFacts, expected: string): Check | undefined {
  if (!lib.version) {
    return {
      id: ID,
      status: 'fail',
      actual: 'loaded (declares no glidemq version)',
      expected,
      message: `a library named glidemq that no glidemq release wrote (${lib.error ?? 'no version'}); glidemq clients refuse to run it: ${REINSTALL}`,
    };
  }
  if (lib.version === LIBRARY_VERSION && lib.codeSha256 !== undefined && lib.codeSha256 !== LIBRARY_CODE_SHA256) {
    return {
      id: ID,
      status: 'fail',
      actual: `${describe(lib)}, code differs`,
      expected,
      message: `the library reports this build's version but its code is not this build's: someone replaced it, and glidemq clients refuse to run it; ${REINSTALL}`,
    };
  }
  return undefined;
}

function describe(lib: LibraryFacts): string {
  return `${lib.version}${lib.packageVersion ? ` (glidemq ${lib.packageVersion})` : ''}`;
}

export const libraryChecks: CheckModule = (facts, options) => {
  const lib = facts.library;
  const wanted = options.expectedLibraryVersion;
  const expected = wanted ? `glidemq ${wanted}` : 'glidemq loaded';
  if (lib.state === 'unknown') {
    return [{
      id: ID,
      status: 'unknown',
      actual: 'unknown',
      expected,
      message: `could not list functions (${lib.error ?? 'no answer'}); glidemq needs Valkey functions (FUNCTION LIST, FCALL) to be allowed`,
    }];
  }
  if (lib.state === 'missing') {
    return [{
      id: ID,
      status: 'warn',
      actual: 'not loaded',
      expected,
      message: 'the glidemq library is not on this node yet; it is loaded by the first glidemq client that connects as a user allowed to FUNCTION LOAD, or by `glidemq library install`',
    }];
  }
  const refused = untrusted(lib, expected);
  if (refused) return [refused];
  const actual = describe(lib);
  const newer = !!(options.packageVersion && lib.packageVersion && compareVersions(lib.packageVersion, options.packageVersion) > 0);
  if (wanted && wanted !== lib.version) {
    return [{
      id: ID,
      status: 'warn',
      actual,
      expected,
      message: newer
        ? `the node holds a library from a newer glidemq (${lib.packageVersion}) than this one (${options.packageVersion}); upgrade the glidemq running here, it will not downgrade the node`
        : `the loaded library differs from this build's (${wanted}); clients of this build that may FUNCTION LOAD replace it on connect (others wait for \`glidemq library install\`), so mixed versions mean an upgrade in progress`,
    }];
  }
  return [{
    id: ID,
    status: 'pass',
    actual,
    expected,
    message: wanted ? 'the loaded library is the one this build uses' : 'the library is loaded; it persists with the dataset',
  }];
};
