/** Starting and closing a node:http server the way glidemq's HTTP endpoints (the exporter, the dashboard) need. */
import type { Server } from 'node:http';

/**
 * Stops `server` listening and ends its open connections, idle keep-alive ones included: a
 * scraper's or a browser's kept-alive socket would otherwise hold close() open until it times out.
 */
export function closeHttpServer(server: Server): Promise<void> {
  return new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** Starts `server` listening on `host`:`port` (0: any free port); resolves with the port bound, rejects on a bind error. */
export function listenHttpServer(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const addr = server.address();
      resolve(typeof addr === 'object' && addr ? addr.port : port);
    });
  });
}
