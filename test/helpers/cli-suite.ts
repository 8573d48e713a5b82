/**
 * The setup the CLI test files that work on one queue per test share (events, exporter, check,
 * jobs): a server for the file, the CLI run against it, and before each test a fresh queue (its
 * name from the file's label); what a test made through the harness is closed after it.
 */
import type { Queue } from '../../src/engine/queue/queue.js';
import { runCli, startCli, type CliOptions, type CliResult, type RunningCli } from './cli.js';
import { Harness, uniqueQueue } from './engine.js';
import { useServer, type TestServer } from './valkey.js';

export interface CliSuite {
  server: () => TestServer;
  /** Queues and workers closed after each test. */
  harness: Harness;
  /** Runs the CLI to its exit against the file's server (`-u <url>` first), with the file's options under `opts`. */
  cli: (args: string[], opts?: CliOptions) => Promise<CliResult>;
  /** Starts a long-running CLI (events --follow, exporter) against the file's server. */
  start: (args: string[]) => RunningCli;
}

/** This test's queue: a fresh name, and a Queue on it. */
export interface CliTestQueue {
  name: string;
  q: Queue;
}

/**
 * Call once at the top of a describe: starts the file's server, and before each test makes a
 * queue named `label` + random hex, handed to `onEach` (the file keeps it in its own variables);
 * after each test closes what the harness made. `defaults`: options of every `cli` run (a file's
 * TZ, say); a run's own env is laid over their env.
 */
export function useCliSuite(label: string, onEach: (made: CliTestQueue) => void, defaults: CliOptions = {}): CliSuite {
  const server = useServer();
  const harness = new Harness(server);
  beforeEach(() => {
    const name = uniqueQueue(label);
    onEach({ name, q: harness.queue(name) });
  });
  afterEach(() => harness.cleanup());
  return {
    server,
    harness,
    cli: (args, opts = {}) => runCli(['-u', server().url, ...args], { ...defaults, ...opts, env: { ...defaults.env, ...opts.env } }),
    start: (args) => startCli(['-u', server().url, ...args]),
  };
}
