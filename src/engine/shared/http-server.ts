/** Closing a node:http server the way glidemq's HTTP endpoints (the exporter, the dashboard) need. */
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
