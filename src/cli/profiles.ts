/**
 * Connection profiles: named connection settings in one JSON file, so that an operator types
 * `glidemq --profile prod stats emails` rather than a URL, a CA file and a prefix each time.
 *
 * The file: $GLIDEMQ_CONFIG, else $XDG_CONFIG_HOME/glidemq/config.json, else
 * ~/.config/glidemq/config.json (the XDG base directory rule), shaped
 *
 *   { "profiles": { "prod": { "url": "rediss://app@db:6380", "tlsCa": "ca.pem", "prefix": "jobs",
 *                             "cluster": false } } }
 *
 * The profile used: `--profile <name>`, else $GLIDEMQ_PROFILE, else the one named "default" when
 * the file has it, else none. Each setting is taken from the first of: its flag, the named profile,
 * its environment variable, the "default" profile, the built-in default (CLI.md: flags override
 * the profile, the profile the environment; context.ts applies that order). A relative tlsCa is
 * relative to the file. A file that is not what it should be, or a profile it lacks, is a usage
 * error naming the file: settings silently ignored would send commands to the wrong server.
 */
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { invalid } from '../engine/shared/errors.js';

export interface Profile {
  url?: string;
  cluster?: boolean;
  prefix?: string;
  tlsCa?: string;
}

export interface ChosenProfile {
  name: string;
  /** The file it came from, for messages. */
  file: string;
  settings: Profile;
}

const FIELDS: Record<keyof Profile, 'string' | 'boolean'> = { url: 'string', cluster: 'boolean', prefix: 'string', tlsCa: 'string' };

/** Where the profiles are read from. */
export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.GLIDEMQ_CONFIG) return env.GLIDEMQ_CONFIG;
  // XDG: a relative $XDG_CONFIG_HOME is invalid and must be ignored
  const base = env.XDG_CONFIG_HOME && isAbsolute(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : join(homedir(), '.config');
  return join(base, 'glidemq', 'config.json');
}

/** Every profile in the file (none when there is no file); throws on a malformed file. */
export function readProfiles(file: string): Record<string, Profile> {
  if (!existsSync(file)) return {};
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw invalid(`${file}: cannot read the profile file: ${(err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw invalid(`${file}: not valid JSON (${(err as Error).message})`);
  }
  if (!isObject(doc)) throw invalid(`${file}: expected a JSON object like {"profiles": {"prod": {"url": "redis://..."}}}`);
  const unknownTop = Object.keys(doc).filter((k) => k !== 'profiles');
  if (unknownTop.length) throw invalid(`${file}: unknown key "${unknownTop[0]}" (the file holds "profiles")`);
  const profiles = doc.profiles ?? {};
  if (!isObject(profiles)) throw invalid(`${file}: "profiles" must be an object of named profiles`);
  const out: Record<string, Profile> = {};
  for (const [name, value] of Object.entries(profiles)) out[name] = checkProfile(file, name, value);
  return out;
}

function checkProfile(file: string, name: string, value: unknown): Profile {
  if (!isObject(value)) throw invalid(`${file}: profile "${name}" must be an object with url, cluster, prefix, tlsCa`);
  const profile: Profile = {};
  for (const [key, v] of Object.entries(value)) {
    const type = FIELDS[key as keyof Profile];
    if (!type) throw invalid(`${file}: profile "${name}" has an unknown setting "${key}" (known: url, cluster, prefix, tlsCa)`);
    if (typeof v !== type || (type === 'string' && v === '')) {
      throw invalid(`${file}: profile "${name}": "${key}" must be ${type === 'string' ? 'a non-empty string' : 'true or false'}`);
    }
    (profile as Record<string, unknown>)[key] = v;
  }
  if (profile.tlsCa !== undefined) profile.tlsCa = resolvePath(file, profile.tlsCa);
  return profile;
}

/** `~/ca.pem` is in the home directory; `ca.pem` beside the profile file. */
function resolvePath(file: string, path: string): string {
  if (path === '~' || path.startsWith('~/')) return join(homedir(), path.slice(1));
  return resolve(dirname(file), path);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * The profile this run uses: the one named by `--profile` (`flag`) or $GLIDEMQ_PROFILE, else
 * "default" when the file has one, else undefined. A named profile the file lacks is an error.
 */
export function chooseProfile(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): ChosenProfile | undefined {
  const file = configPath(env);
  const named = flag ?? (env.GLIDEMQ_PROFILE || undefined);
  if (named !== undefined && named.trim() === '') throw invalid('--profile needs a profile name');
  const profiles = readProfiles(file);
  if (named === undefined) return profiles.default ? { name: 'default', file, settings: profiles.default } : undefined;
  const settings = Object.hasOwn(profiles, named) ? profiles[named] : undefined;
  if (!settings) {
    const have = Object.keys(profiles);
    const why = !existsSync(file) ? 'the file does not exist' : have.length ? `profiles there: ${have.join(', ')}` : 'it has no profiles';
    const from = flag !== undefined ? '' : ' ($GLIDEMQ_PROFILE)';
    throw invalid(`${file}: no profile "${named}"${from}: ${why}`);
  }
  return { name: named, file, settings };
}
