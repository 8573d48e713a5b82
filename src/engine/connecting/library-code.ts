/**
 * The code of the Lua function library `glidemq`, as this client holds it: assembled from lua/ in
 * the order lua/ORDER gives and versioned by a hash of that source (or read back from the snapshot
 * the build wrote, while lua/ still matches it). Nothing here talks to a server: library.ts loads,
 * checks, installs and calls this code.
 */
import { createHash } from 'node:crypto';
import { readFileSync, statSync, writeFileSync } from 'node:fs';

export const LIBRARY_NAME = 'glidemq';
/**
 * The package root, the one place that knows how deep this module sits: every path below is named
 * from it. This module (dist/src/engine/connecting/library-code.js) also runs inside the CLI bundle
 * (dist/src/cli/bundle.cjs, whose import.meta.url is the bundle's own), one folder less deep;
 * moving either file to another depth changes only the matching arm here.
 */
const ROOT = new URL(import.meta.url.endsWith('.cjs') ? '../../../' : '../../../../', import.meta.url);
const LUA_DIR = new URL('lua/', ROOT);
const PACKAGE_VERSION: string = JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8')).version;
const SNAPSHOT = new URL('dist/src/engine/connecting/library.snapshot', ROOT);
/** This module as tsc writes it: a snapshot older than it may come from other assembly code. */
const MODULE = new URL('dist/src/engine/connecting/library-code.js', ROOT);
/** Only a checkout has it (the package does not ship it). */
const CHECKOUT_MARK = new URL('tsconfig.json', ROOT);

interface Assembled {
  code: string;
  version: string;
  /** sha256 of code. */
  codeSha256: string;
  /** code in UTF-8, as a server sends it back. */
  bytes: Buffer;
}

function luaFiles(): { order: string[]; sources: Buffer[] } {
  const order = readFileSync(new URL('ORDER', LUA_DIR), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  return { order, sources: order.map((file) => readFileSync(new URL(file, LUA_DIR))) };
}

function assemble(order: string[], sources: Buffer[]): Assembled {
  const body = order.map((file, i) => `-- ==== ${file} ====\n${sources[i].toString('utf8')}`).join('\n');
  const version = createHash('sha256').update(body).digest('hex').slice(0, 16);
  const code =
    `#!lua name=${LIBRARY_NAME}\n` +
    body.replaceAll('__GLIDEMQ_LIBRARY_VERSION__', version).replaceAll('__GLIDEMQ_PACKAGE_VERSION__', PACKAGE_VERSION);
  return { code, version, codeSha256: sha256(code), bytes: Buffer.from(code, 'utf8') };
}

/**
 * The snapshot file: one line of JSON (SnapshotHead), the code, then the Lua files it was
 * assembled from, byte for byte in the order of lua/ORDER.
 */
interface SnapshotHead {
  package: string;
  version: string;
  codeSha256: string;
  codeBytes: number;
  /** [file, bytes] */
  files: [string, number][];
}

/**
 * The library as the build assembled it (writeLibrarySnapshot), while lua/ holds exactly the source
 * it was assembled from and, in a checkout, this module is no newer than the snapshot (tsc run
 * alone after a change here): a start of the CLI then compares bytes instead of rewriting and
 * hashing 260 KB of Lua twice (some 5 ms of a one-job enqueue). Anything else (no build, a Lua
 * file or this module changed since) assembles as usual. In an installed package the file times
 * are when npm unpacked them, and say nothing.
 */
function fromSnapshot(order: string[], sources: Buffer[]): Assembled | undefined {
  const mtime = (url: URL) => statSync(url, { throwIfNoEntry: false })?.mtimeMs ?? -1;
  const made = mtime(SNAPSHOT);
  if (made < 0 || (mtime(CHECKOUT_MARK) >= 0 && made < mtime(MODULE))) return undefined;
  let snap: Buffer;
  let head: SnapshotHead;
  try {
    snap = readFileSync(SNAPSHOT);
    head = JSON.parse(snap.toString('utf8', 0, snap.indexOf(10))) as SnapshotHead;
  } catch {
    return undefined; // unreadable: assemble
  }
  if (head.package !== PACKAGE_VERSION || head.files?.length !== order.length) return undefined;
  const codeAt = snap.indexOf(10) + 1;
  let at = codeAt + head.codeBytes; // the Lua files follow the code
  for (let i = 0; i < order.length; i++) {
    const [file, bytes] = head.files[i];
    if (file !== order[i] || bytes !== sources[i].length || !sources[i].equals(snap.subarray(at, at + bytes))) return undefined;
    at += bytes;
  }
  if (at !== snap.length) return undefined;
  const bytes = snap.subarray(codeAt, codeAt + head.codeBytes);
  return { code: bytes.toString('utf8'), version: head.version, codeSha256: head.codeSha256, bytes };
}

/** Build step (`npm run build`, after tsc): writes the snapshot fromSnapshot reads. */
export function writeLibrarySnapshot(): void {
  const { order, sources } = luaFiles();
  const { code, version, codeSha256 } = assemble(order, sources);
  const codeBytes = Buffer.from(code, 'utf8');
  const files = order.map((file, i): [string, number] => [file, sources[i].length]);
  const head: SnapshotHead = { package: PACKAGE_VERSION, version, codeSha256, codeBytes: codeBytes.length, files };
  writeFileSync(SNAPSHOT, Buffer.concat([Buffer.from(`${JSON.stringify(head)}\n`), codeBytes, ...sources]));
}

const lua = luaFiles();
const assembled = fromSnapshot(lua.order, lua.sources) ?? assemble(lua.order, lua.sources);
export const LIBRARY_CODE = assembled.code;
/** Hash of the Lua source: changes whenever any Lua file changes, never bumped by hand. */
export const LIBRARY_VERSION = assembled.version;
export const LIBRARY_PACKAGE_VERSION = PACKAGE_VERSION;

/**
 * LIBRARY_CODE in UTF-8: a node's library is compared with it byte for byte (library.ts
 * inspectNode), without decoding the 450 KB the node sends back.
 */
export const LIBRARY_CODE_BYTES: Buffer = assembled.bytes;

/** sha256 of LIBRARY_CODE: what `glidemq library status` and the audit compare a node's code with. */
export const LIBRARY_CODE_SHA256 = assembled.codeSha256;

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
