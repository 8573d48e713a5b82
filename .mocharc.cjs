// Mocha settings. With no test file named on the command line the whole suite runs; naming files
// (`npx mocha dist/test/integration/queue.test.js`) runs just those.
const SUITE = [
  'dist/test/unit/**/*.test.js',
  'dist/test/integration/**/*.test.js',
  'dist/test/cli/**/*.test.js',
  'dist/test/compat/**/*.test.js',
  'dist/test/model/**/*.test.js',
  'dist/test/load/**/*.test.js',
];
const named = process.argv.slice(2).some((a) => /\.test\.js$/.test(a) || a.includes('*'));
module.exports = {
  spec: named ? [] : SUITE,
  timeout: 30000,
  slow: 2000,
  // Still forced: after the suite one Cluster client is still refreshing its slots (the timers
  // of ioredis's refresh connections), one that some test or path drops without closeClient. To
  // find leaks, run with the guard instead of this: `npx mocha --no-exit --require
  // dist/test/helpers/leak-guard.js` names what is open 10 s after the last test and exits 3.
  exit: true,
  // The whole suite runs two files at a time (one per core): most of its time is spent waiting on
  // servers and CLI child processes, and each file starts its own servers on free ports (a start
  // that loses its port to another listener moves to another: test/helpers/valkey.ts). Named files
  // (`make soak`, one file by hand) run in one process, as before.
  parallel: !named,
  jobs: 2,
};
