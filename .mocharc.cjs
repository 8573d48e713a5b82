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
  // no `exit: true`: a test that leaves a client, server or timer open would keep mocha running;
  // the leak guard names what is open and fails the run instead (test/helpers/leak-guard.ts)
  require: ['dist/test/helpers/leak-guard.js'],
  timeout: 30000,
  slow: 2000,
};
