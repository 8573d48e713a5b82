/**
 * How a long-running command (events --follow, exporter) ends: the first SIGINT or SIGTERM lets
 * it close cleanly and exit 0; a second one while it closes exits at once with 130, as a shell
 * user pressing Ctrl-C twice expects. The listeners stay until the process exits.
 */
export function untilSignal(): Promise<void> {
  return new Promise((resolve) => {
    let signals = 0;
    const onSignal = () => {
      if (++signals > 1) process.exit(130);
      resolve();
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}
