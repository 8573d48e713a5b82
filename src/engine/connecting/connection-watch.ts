/**
 * connectionLost / connectionRestored for a worker (Worker, BroadcastWorker): the connection its
 * commands go over closed while it runs (a server restart, a failover, a network cut), and is
 * ready again. ioredis reconnects on its own and the worker rides it out; these events only let
 * the application say so (the CLI worker prints them). Lost is told once per outage, however
 * many reconnect attempts fail; `why` is the socket's last error (e.g. ECONNREFUSED) when there was one.
 */
import type { EventEmitter } from 'node:events';
import type { Client } from './connection.js';

/** Starts watching `client` for `worker`; returns what stops it (call it before closing the client). */
export function watchConnection(client: Client, worker: EventEmitter, running: () => boolean): () => void {
  let down = false;
  let since = 0;
  let lastError = '';
  const onError = (err: Error) => {
    lastError = err.message;
  };
  const onClose = () => {
    if (down || !running()) return;
    down = true;
    since = performance.now();
    worker.emit('connectionLost', lastError || 'the connection closed');
  };
  const onReady = () => {
    lastError = '';
    if (!down) return;
    down = false;
    worker.emit('connectionRestored', Math.round(performance.now() - since));
  };
  client.on('error', onError);
  client.on('close', onClose);
  client.on('ready', onReady);
  return () => {
    client.off('error', onError);
    client.off('close', onClose);
    client.off('ready', onReady);
  };
}
