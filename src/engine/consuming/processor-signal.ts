/**
 * Whether a processor may read the AbortSignal its run is given: the Worker's runner makes one per
 * run only then (worker-runner.ts), as a sandbox child does (sandbox-child.ts), since a signal costs
 * a few µs per job. Its own module, so that a sandbox child loads no more than this.
 */

/**
 * The processor declares a third parameter (job, token, signal), or may read its arguments without
 * naming them (a rest parameter, `arguments`, a bound or native function). One that reads it
 * through a default parameter (`signal = undefined`) is not seen; give it a plain one.
 */
export function takesSignal(fn: Function): boolean {
  return fn.length >= 3 || (fn.length === 0 && readsArgumentsFreely(fn));
}

/**
 * A function of length 0 that may still read arguments: a rest parameter, `arguments`, or code we
 * cannot see.
 */
export function readsArgumentsFreely(fn: Function): boolean {
  return /\.\.\.|\barguments\b|\[native code\]/.test(Function.prototype.toString.call(fn));
}
