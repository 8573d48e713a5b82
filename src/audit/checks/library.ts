/** The glidemq function library on the node, and whether its version is the one this build loads. */
import { compareVersions } from '../../engine/library.js';
import type { Check, CheckModule } from '../types.js';

export const libraryChecks: CheckModule = (facts, options) => {
  const id = 'function-library';
  const lib = facts.library;
  const wanted = options.expectedLibraryVersion;
  const expected = wanted ? `glidemq ${wanted}` : 'glidemq loaded';
  let check: Check;
  if (lib.state === 'unknown') {
    check = {
      id,
      status: 'unknown',
      actual: 'unknown',
      expected,
      message: `could not list functions (${lib.error ?? 'no answer'}); glidemq needs Valkey functions (FUNCTION, FCALL) to be allowed`,
    };
  } else if (lib.state === 'missing') {
    check = {
      id,
      status: 'warn',
      actual: 'not loaded',
      expected,
      message: 'the glidemq library is not on this node yet; it is loaded by the first glidemq client that connects',
    };
  } else if (!lib.version) {
    check = {
      id,
      status: 'warn',
      actual: 'loaded (version unreadable)',
      expected,
      message: `glidemq_version did not answer (${lib.error ?? 'no version'}); an older library is loaded and the next client of this build replaces it`,
    };
  } else {
    const actual = `${lib.version}${lib.packageVersion ? ` (glidemq ${lib.packageVersion})` : ''}`;
    const newer = !!(options.packageVersion && lib.packageVersion && compareVersions(lib.packageVersion, options.packageVersion) > 0);
    if (wanted && wanted !== lib.version) {
      check = {
        id,
        status: 'warn',
        actual,
        expected,
        message: newer
          ? `the node holds a library from a newer glidemq (${lib.packageVersion}) than this one (${options.packageVersion}); upgrade the glidemq running here, it will not downgrade the node`
          : `the loaded library differs from this build's (${wanted}); clients of this build replace it on connect, so mixed versions mean an upgrade in progress`,
      };
    } else {
      check = {
        id,
        status: 'pass',
        actual,
        expected,
        message: wanted ? 'the loaded library is the one this build uses' : 'the library is loaded; it persists with the dataset',
      };
    }
  }
  return [check];
};
