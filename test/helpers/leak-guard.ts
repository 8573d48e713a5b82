/**
 * Root hooks for the whole suite (.mocharc.cjs `require`): mocha runs without `exit: true`, so a
 * client, server or timer a test leaves open keeps the process alive. Ten seconds after the last
 * test this guard names what is still open and fails the run (exit 3), instead of the run hanging
 * or a forced exit hiding the leak. Its own timer is unref'd: a clean run ends at once.
 */
const GRACE_MS = 10_000;

export const mochaHooks = {
  afterAll(): void {
    setTimeout(() => {
      const open = process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap');
      console.error(`leak guard: the suite ended ${GRACE_MS / 1000} s ago and these are still open: ${open.join(', ') || '(none)'}`);
      // mocha sets the exit code to its failure count in an 'exit' listener: this one runs after it
      process.on('exit', () => {
        process.exitCode = 3;
      });
      process.exit(3);
    }, GRACE_MS).unref();
  },
};
