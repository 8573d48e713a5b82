/**
 * Output into a pipe whose reader has gone (`glidemq audit | head -1`, `glidemq metrics | head`).
 *
 * `ls`, `git log` and every C tool are ended by SIGPIPE there: no message, and the shell sees the
 * status 141 (128 + SIGPIPE), which `set -o pipefail` scripts already expect from such a pipeline.
 * Node ignores SIGPIPE, so a write fails with EPIPE instead, and an unhandled EPIPE is a stack
 * trace and exit 1. glidemq does what those tools do: it stops at once, silently, with 141. What a
 * command already did stays done (the jobs `enqueue` added are added); only the rest of its output
 * had no reader left. Any other error of the streams is not ours to hide and is thrown again.
 */
const SIGPIPE_STATUS = 128 + 13;

function onStreamError(err: NodeJS.ErrnoException): void {
  if (err.code === 'EPIPE') process.exit(SIGPIPE_STATUS);
  throw err;
}

/** Installs the handler on stdout and stderr (once per process). */
export function exitQuietlyOnClosedPipe(): void {
  for (const stream of [process.stdout, process.stderr]) {
    if (!stream.listeners('error').includes(onStreamError)) stream.on('error', onStreamError);
  }
}
